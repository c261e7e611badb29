//! The swarm's private tmux socket: one per project root and user, named as
//! SwarmForge names it.

use std::path::{Path, PathBuf};

/// CRC-32 (ISO-HDLC, as zlib and Java's `CRC32`).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// `$UID` when exported, else the account name (SwarmForge's rule), else the
/// numeric uid. Never reads `HOME`.
pub fn user_name() -> String {
    if let Ok(u) = std::env::var("UID") {
        if !u.is_empty() {
            return u;
        }
    }
    // SAFETY: getuid cannot fail.
    crate::sys::account::name().unwrap_or_else(|| unsafe { libc::getuid() }.to_string())
}

/// `/tmp/swarmforge-<user>/<crc32 of the root path>.sock` (docs/launcher.md):
/// short enough for a socket path, outside any sandboxed worktree.
pub fn socket_path(root: &Path) -> PathBuf {
    let crc = crc32(root.to_string_lossy().as_bytes());
    PathBuf::from("/tmp")
        .join(format!("swarmforge-{}", user_name()))
        .join(format!("{crc}.sock"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn crc32_matches_zlib() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn socket_path_shape() {
        let p = socket_path(Path::new("/work/p"));
        let s = p.to_string_lossy();
        assert!(s.starts_with("/tmp/swarmforge-"), "{s}");
        assert!(s.ends_with(&format!("/{}.sock", crc32(b"/work/p"))), "{s}");
    }
}
