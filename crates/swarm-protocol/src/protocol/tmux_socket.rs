//! The swarm's private tmux socket and its pointer.
//!
//! The socket: one per project root and user,
//! `/tmp/swarmforge-<user>/<crc32 of the root>.sock`, named as SwarmForge
//! names it (docs/launcher.md). The pointer: `.swarmforge/tmux-socket`
//! ([`Project::tmux_socket`]), one line holding that socket's path, which
//! `swarm up` writes (launch/up.rs) and `swarm down` removes; while it is
//! there the swarm runs in tmux.
//!
//! Every reader of the pointer reads it here, through [`read`], and believes
//! it only when it names a socket this swarm would have made
//! ([`expected_sockets`]): `swarm status`, `swarm attach` and `swarm pick`,
//! the daemon's wake-ups and watchdog, `swarm role add/remove`, `swarm down`
//! and doctor. It is read bounded and without following a link or blocking
//! on a FIFO, one line, no control characters. Anything else is refused with
//! one message (the file, why, and the repair: [`REPAIR`]), so no reader
//! connects to a socket someone else's tmux server listens on (its sessions
//! could be named like the swarm's: typing a wake-up or a person's answer
//! into them, or reporting them as the agents' panes), and `swarm down`
//! removes no file the pointer names but the swarm's own socket.
//!
//! Why check what only the person's side writes: a confined agent cannot
//! write `.swarmforge/` (docs/security.md, "Confinement"), but an agent run
//! with `launch: {confine: false}`, or any program of the person's running
//! in the project, can; and the check costs one comparison. Invariant: a
//! socket path comes from this module only when it is the one the swarm
//! makes.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::protocol::layout::Project;

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

/// Largest pointer read (a socket path is far shorter).
const MAX_POINTER: u64 = 4096;

/// How to repair a pointer that cannot be believed.
pub const REPAIR: &str = "run `swarm down` (it removes the file), or remove the file when no swarm runs; `swarm up` writes it again";

/// The socket paths `swarm up` may have written for `root`: its folder is
/// named after `$UID` when exported, else the account name ([`user_name`]),
/// so a `swarm up` from another shell may have used either spelling.
pub fn expected_sockets(root: &Path) -> Vec<PathBuf> {
    let file = format!("{}.sock", crc32(root.to_string_lossy().as_bytes()));
    let mut users = vec![user_name()];
    users.extend(crate::sys::account::name());
    // SAFETY: getuid cannot fail.
    users.push(unsafe { libc::getuid() }.to_string());
    let mut out: Vec<PathBuf> = Vec::new();
    for u in users {
        let p = Path::new("/tmp")
            .join(format!("swarmforge-{u}"))
            .join(&file);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// What the pointer file holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Pointer {
    /// No pointer: no tmux swarm was started (or `swarm down` ran).
    Absent,
    /// The socket this swarm would have made.
    Socket(PathBuf),
    /// Anything else: why it is not believed.
    Invalid(String),
}

impl Pointer {
    /// The socket, `None` without a pointer; a pointer that cannot be
    /// believed is an error naming the file, why, and [`REPAIR`].
    pub fn socket(self, project: &Project) -> Result<Option<PathBuf>> {
        match self {
            Pointer::Absent => Ok(None),
            Pointer::Socket(s) => Ok(Some(s)),
            Pointer::Invalid(why) => Err(refusal(project, &why)),
        }
    }
}

/// The one message for a pointer that cannot be believed.
pub fn refusal(project: &Project, why: &str) -> Error {
    Error::bad_file_hint(
        project.tmux_socket(),
        format!("cannot be believed: {why}; no tmux server was asked through it"),
        REPAIR,
    )
}

/// Reads and checks the pointer of `project`.
pub fn read(project: &Project) -> Pointer {
    read_pointer(&project.tmux_socket(), &project.root)
}

/// Reads and checks the pointer `file` of the project at `root`.
pub fn read_pointer(file: &Path, root: &Path) -> Pointer {
    use crate::fsx::ReadRefusal;
    let bytes = match crate::fsx::read_bounded(file, MAX_POINTER) {
        Ok(b) => b,
        Err(ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Pointer::Absent
        }
        Err(e) => return Pointer::Invalid(e.to_string()),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return Pointer::Invalid("it is not UTF-8 text".into());
    };
    // One line, as `swarm up` writes it: the path and a newline.
    let line = text.strip_suffix('\n').unwrap_or(&text);
    if line.trim().is_empty() {
        return Pointer::Invalid("it names no socket (it is empty)".into());
    }
    if line.chars().any(char::is_control) {
        return Pointer::Invalid(format!(
            "it holds control characters or more than one line: '{}'",
            crate::text::escape(&first_chars(line))
        ));
    }
    let named = PathBuf::from(line);
    let expected = expected_sockets(root);
    if expected.contains(&named) {
        Pointer::Socket(named)
    } else {
        Pointer::Invalid(format!(
            "it names {}, which is not the socket this swarm makes ({})",
            crate::text::escape(&first_chars(line)),
            expected[0].display()
        ))
    }
}

/// At most 200 characters of `s`, for a message.
fn first_chars(s: &str) -> String {
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
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

    fn pointer(text: &[u8]) -> Pointer {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("tmux-socket");
        std::fs::write(&f, text).unwrap();
        read_pointer(&f, Path::new("/work/p"))
    }

    #[test]
    fn the_socket_the_swarm_makes_is_believed() {
        let sock = socket_path(Path::new("/work/p"));
        let line = format!("{}\n", sock.display());
        assert_eq!(pointer(line.as_bytes()), Pointer::Socket(sock));
    }

    #[test]
    fn anything_else_is_not() {
        let bad: [&[u8]; 6] = [
            b"",
            b"\n",
            b"/tmp/elsewhere.sock\n",
            b"\xff\xfe\n",
            b"/tmp/swarmforge-x/1.sock\x1b[2J\n",
            b"relative.sock",
        ];
        for b in bad {
            assert!(
                matches!(pointer(b), Pointer::Invalid(_)),
                "{:?}",
                String::from_utf8_lossy(b)
            );
        }
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            read_pointer(&d.path().join("none"), Path::new("/work/p")),
            Pointer::Absent
        );
        // A folder (or a FIFO) there is refused, not read.
        assert!(matches!(
            read_pointer(d.path(), Path::new("/work/p")),
            Pointer::Invalid(_)
        ));
    }
}
