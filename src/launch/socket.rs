//! The swarm's private tmux socket: one per project root and user, named as
//! SwarmForge names it.

use std::ffi::CStr;
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
    account_name().unwrap_or_else(|| unsafe { libc::getuid() }.to_string())
}

/// The name of this process's account (getpwuid_r of its real uid), when
/// the password database has one.
pub fn account_name() -> Option<String> {
    // SAFETY: getpwuid_r writes into the buffers we own; the name is copied
    // out before they go away.
    unsafe {
        let uid = libc::getuid();
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut res);
        if rc == 0 && !res.is_null() && !pwd.pw_name.is_null() {
            return Some(CStr::from_ptr(pwd.pw_name).to_string_lossy().into_owned());
        }
        None
    }
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
