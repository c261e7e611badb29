//! The `tmux_socket` check: `.swarmforge/tmux-socket` is a pointer, one line
//! holding the path of the swarm's private tmux socket (`swarm up` writes
//! it, protocol/tmux_socket.rs names the socket, `swarm down` removes both). The
//! check reads the pointer and asks a tmux server on the socket it names.
//!
//! The pointer is read as every reader reads it (protocol::tmux_socket):
//! believed only when it names a socket this swarm would have made, so
//! doctor never connects to a socket someone planted.

use super::{Context, Finding};
use crate::protocol::swarmforge_conf::is_command;
use crate::protocol::tmux_socket::{self, Pointer};

/// The pointer names a socket no tmux server answers on (left by a swarm
/// that was not stopped with `swarm down`), or it cannot be believed; or
/// tmux, which `swarm up` runs agents in by default, is not installed to
/// ask (or, before `swarm init`, at all).
pub fn tmux_socket(cx: &Context) -> Vec<Finding> {
    let file = cx.project.tmux_socket();
    let pointer = tmux_socket::read(&cx.project);
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
            tmux_socket::REPAIR,
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
