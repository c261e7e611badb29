//! The `tmux_socket` check: `.swarmforge/tmux-socket` is a pointer, one line
//! holding the path of the swarm's private tmux socket (`swarm up` writes
//! it, launch/socket.rs names the socket, `swarm down` removes both). The
//! check reads the pointer and asks a tmux server on the socket it names.
//!
//! The pointer lies in the project, where an agent may write: it is read
//! bounded and without following a link, and believed only when it names a
//! socket this swarm would have made (`/tmp/swarmforge-<user>/<crc32 of
//! the root>.sock`), so doctor never connects to a socket someone planted.

use std::path::{Path, PathBuf};

use super::{Context, Finding};
use crate::launch::socket::{crc32, user_name};
use crate::protocol::swarmforge_conf::is_command;

/// Largest pointer read (a socket path is far shorter).
const MAX_POINTER: u64 = 4096;

/// The socket paths `swarm up` may have written for `root`: its folder is
/// named after `$UID` when exported, else the account name (launch/socket.rs),
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

/// Reads and checks the pointer of the project at `root`.
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
    if expected_sockets(root).contains(&named) {
        Pointer::Socket(named)
    } else {
        Pointer::Invalid(format!(
            "it names {}, which is not the socket this swarm makes ({})",
            crate::text::escape(&first_chars(line)),
            expected_sockets(root)[0].display()
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

/// The pointer names a socket no tmux server answers on (left by a swarm
/// that was not stopped with `swarm down`), or it cannot be believed; or
/// tmux, which `swarm up` runs agents in by default, is not installed to
/// ask (or, before `swarm init`, at all).
pub fn tmux_socket(cx: &Context) -> Vec<Finding> {
    let file = cx.project.tmux_socket();
    let pointer = read_pointer(&file, &cx.project.root);
    if !is_command("tmux") {
        // Without a pointer only before `swarm init`, when nothing says
        // how the swarm will run: a headless swarm needs no tmux.
        if pointer == Pointer::Absent && cx.initialised {
            return Vec::new();
        }
        let message = match pointer {
            Pointer::Absent => "tmux is not installed: `swarm up` runs each agent in a tmux session unless told `--no-tmux`",
            _ => "a tmux swarm's socket pointer exists, but tmux is not installed to ask it",
        };
        return vec![Finding::new(
            "TMUX_MISSING",
            message,
            "install tmux (Debian/Ubuntu: apt-get install tmux), or run headless with `swarm up --no-tmux`",
        )
        .at(file)];
    }
    match pointer {
        Pointer::Absent => Vec::new(),
        Pointer::Invalid(why) => vec![Finding::new(
            "TMUX_SOCKET_POINTER",
            format!("{} cannot be believed: {why}", file.display()),
            "run `swarm down` (it removes the file), or remove the file when no swarm runs; `swarm up` writes it again",
        )
        .at(file)],
        Pointer::Socket(sock) => {
            if crate::sys::tmux::ok(&sock, &["list-sessions"]) {
                return Vec::new();
            }
            vec![Finding::new(
                "TMUX_SOCKET_STALE",
                format!(
                    "{} names {}, but no tmux server answers on it: the swarm there was not stopped with `swarm down`",
                    file.display(),
                    sock.display()
                ),
                "run `swarm down` (it removes the pointer); `swarm up` starts a new server",
            )
            .at(file)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointer(text: &[u8]) -> Pointer {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("tmux-socket");
        std::fs::write(&f, text).unwrap();
        read_pointer(&f, Path::new("/work/p"))
    }

    #[test]
    fn the_socket_the_swarm_makes_is_believed() {
        let sock = crate::launch::socket::socket_path(Path::new("/work/p"));
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
