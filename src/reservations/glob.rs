//! The globs a reservation names: paths relative to the repository's top
//! (the same in every role's worktree), with `*` and `?` inside one path
//! segment and `**` for any number of segments. Normalised when reserved
//! (`.` and `..` resolved, the caller's subfolder prefixed), and refused when
//! they would leave the worktree.

use std::path::Path;

/// Longest glob accepted, in bytes.
pub const MAX_GLOB_BYTES: usize = 1024;

/// `glob` as typed in folder `sub` of the worktree (`""` at its top): the
/// repository-relative glob, or why it is refused.
pub fn normalise(glob: &str, worktree: &Path, cwd: &Path) -> Result<String, String> {
    let shown = crate::text::escape(glob);
    if glob.is_empty() || glob.len() > MAX_GLOB_BYTES {
        return Err(format!(
            "glob '{shown}': empty or longer than {MAX_GLOB_BYTES} bytes"
        ));
    }
    if glob.chars().any(char::is_control) || glob.contains('\\') {
        return Err(format!(
            "glob '{shown}': control characters and backslashes are not allowed"
        ));
    }
    if glob.contains(['[', ']', '{', '}']) {
        return Err(format!(
            "glob '{shown}': only *, ? and ** are understood (no [..] or {{..}}); name each pattern"
        ));
    }
    let (base, rest): (Vec<String>, &str) = if let Some(abs) = glob.strip_prefix('/') {
        (Vec::new(), abs)
    } else {
        let sub = cwd.strip_prefix(worktree).map_err(|_| {
            format!(
                "{} is not inside the worktree {}",
                cwd.display(),
                worktree.display()
            )
        })?;
        (
            sub.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect(),
            glob,
        )
    };
    let mut parts = base;
    if glob.starts_with('/') {
        // An absolute glob must name a place inside the worktree.
        let wt: Vec<String> = worktree
            .components()
            .skip(1)
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        if segs.len() < wt.len() || segs[..wt.len()].iter().zip(&wt).any(|(a, b)| a != b) {
            return Err(format!(
                "glob '{shown}' escapes the project: an absolute glob must lie inside {}",
                worktree.display()
            ));
        }
        return normalise(&segs[wt.len()..].join("/"), worktree, worktree);
    }
    for seg in rest.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(format!(
                        "glob '{shown}' escapes the project (its `..` leaves {})",
                        worktree.display()
                    ));
                }
            }
            s if s.contains("**") && s != "**" => {
                return Err(format!("glob '{shown}': `**` must be a whole path segment"))
            }
            s => parts.push(s.to_string()),
        }
    }
    if parts.is_empty() {
        return Ok("**".to_string());
    }
    if parts.iter().any(|p| p == ".git") {
        return Err(format!("glob '{shown}': .git is not a file of the project"));
    }
    Ok(parts.join("/"))
}

/// Every glob typed in `cwd` for `worktree` (both canonicalised; a `cwd`
/// outside the worktree counts as its top), normalised.
pub fn normalise_all<S: AsRef<str>>(
    typed: &[S],
    worktree: &Path,
    cwd: &Path,
) -> Result<Vec<String>, String> {
    let wt = worktree
        .canonicalize()
        .unwrap_or_else(|_| worktree.to_path_buf());
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    let cwd = if cwd.starts_with(&wt) {
        cwd
    } else {
        wt.clone()
    };
    typed
        .iter()
        .map(|g| normalise(g.as_ref(), &wt, &cwd))
        .collect()
}

/// Whether `path` (repository-relative, `/`-separated) matches `glob`.
pub fn matches(glob: &str, path: &str) -> bool {
    let g: Vec<&str> = glob.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    wild(
        &g,
        &p,
        |g| *g == "**",
        |_| false,
        |g, s| {
            wild(
                g.as_bytes(),
                s.as_bytes(),
                |c| *c == b'*',
                |c| *c == b'?',
                |a, b| a == b,
            )
        },
    )
}

/// Wildcard matching in O(len(g) * len(s)) (the greedy two-pointer walk
/// that backtracks only to the last star), so no hostile glob can make it
/// explode.
fn wild<G, S>(
    g: &[G],
    s: &[S],
    star: impl Fn(&G) -> bool,
    any: impl Fn(&G) -> bool,
    eq: impl Fn(&G, &S) -> bool,
) -> bool {
    let (mut i, mut j) = (0, 0);
    let mut back: Option<(usize, usize)> = None;
    while j < s.len() {
        if i < g.len() && star(&g[i]) {
            back = Some((i, j));
            i += 1;
        } else if i < g.len() && (any(&g[i]) || eq(&g[i], &s[j])) {
            i += 1;
            j += 1;
        } else if let Some((bi, bj)) = back {
            i = bi + 1;
            j = bj + 1;
            back = Some((bi, bj + 1));
        } else {
            return false;
        }
    }
    g[i..].iter().all(star)
}

/// Whether a glob has no wildcard (names one path).
pub fn is_literal(glob: &str) -> bool {
    !glob.contains(['*', '?'])
}

/// Whether two globs may name one file: equal, one matching the other's
/// literal path, or both matching one of `files`.
pub fn overlap(a: &str, b: &str, files: &[String]) -> bool {
    a == b
        || (is_literal(b) && matches(a, b))
        || (is_literal(a) && matches(b, a))
        || files.iter().any(|f| matches(a, f) && matches(b, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_within_and_across_segments() {
        assert!(matches("src/*.rs", "src/a.rs"));
        assert!(!matches("src/*.rs", "src/x/a.rs"));
        assert!(matches("src/**", "src/x/a.rs"));
        assert!(matches("src/**/*.rs", "src/a.rs"));
        assert!(matches("**", "a/b"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
    }

    #[test]
    fn normalising_resolves_dots_and_refuses_escapes() {
        let wt = Path::new("/p/wt");
        assert_eq!(normalise("./a/../b/*.rs", wt, wt).unwrap(), "b/*.rs");
        assert_eq!(
            normalise("x.rs", wt, Path::new("/p/wt/src")).unwrap(),
            "src/x.rs"
        );
        assert_eq!(normalise("/p/wt/src/**", wt, wt).unwrap(), "src/**");
        assert!(normalise("../x", wt, wt)
            .unwrap_err()
            .contains("escapes the project"));
        assert!(normalise("/etc/passwd", wt, wt)
            .unwrap_err()
            .contains("escapes the project"));
        assert!(normalise("src/../../x", wt, wt).is_err());
        assert!(normalise("a/[ab]", wt, wt).is_err());
        assert!(normalise(".git/hooks/*", wt, wt).is_err());
    }
}
