//! Name rules: roles (D9) and queue file names.

/// Longest role name accepted (keeps file names under NAME_MAX).
pub const MAX_ROLE: usize = 64;

/// Role names match `[A-Za-z0-9][A-Za-z0-9-]*` (D9); case is kept.
pub fn valid_role(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_ROLE
        && b[0].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

/// A queue entry we are willing to touch: `*.handoff`, plain ASCII, no leading
/// dot, no path separators, short enough for every filesystem.
pub fn valid_handoff_name(name: &str) -> bool {
    let b = name.as_bytes();
    name.ends_with(".handoff")
        && b.len() <= 255
        && b[0] != b'.'
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b':'))
}

/// `batch_*` directories in `in_process/` and `completed/`.
/// Only names of the shape we create (`batch_<IDTS>_<NNNNNN>` and SwarmForge's
/// alike): anything else is ignored, so a planted name can never reach a
/// terminal or a path unescaped.
pub fn is_batch_dir_name(name: &str) -> bool {
    name.strip_prefix("batch_").is_some_and(|rest| {
        !rest.is_empty()
            && rest.len() <= 64
            && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names() {
        for ok in ["QA", "coder", "code-reviewer", "a1", "9x"] {
            assert!(valid_role(ok), "{ok}");
        }
        for bad in ["", "-a", "a_b", "a,b", "a/b", "é", "a b", &"x".repeat(65)] {
            assert!(!valid_role(bad), "{bad}");
        }
    }

    #[test]
    fn handoff_names() {
        assert!(valid_handoff_name(
            "00_20260615T140531Z_000042_from_architect_to_coder.handoff"
        ));
        assert!(valid_handoff_name("2026-06-15T14:05:32.123Z_50_x.handoff"));
        assert!(!valid_handoff_name(".x.handoff"));
        assert!(!valid_handoff_name("a b.handoff"));
        assert!(!valid_handoff_name("a.handoff.tmp"));
        assert!(!valid_handoff_name("a\n.handoff"));
    }
}
