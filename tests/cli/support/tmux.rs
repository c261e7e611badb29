//! A private tmux server for tests of wake-ups and sessions.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::require_tool;

/// A tmux server on its own socket; killed on drop.
pub struct Tmux {
    pub sock: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    /// `None` (a NOTE; a failure in CI) when tmux is not installed.
    #[track_caller]
    pub fn new() -> Option<Tmux> {
        if !require_tool("tmux", "apt-get install -y tmux") {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        Some(Tmux {
            sock: dir.path().join("sock"),
            _dir: dir,
        })
    }

    /// A server on the socket the swarm at `root` makes (the only one its
    /// `.swarmforge/tmux-socket` may name: protocol::tmux_socket), for a
    /// test that writes that pointer itself.
    #[track_caller]
    pub fn of_project(root: &Path) -> Option<Tmux> {
        let mut t = Tmux::new()?;
        t.sock = swarm_handoff::protocol::tmux_socket::socket_path(root);
        std::fs::create_dir_all(t.sock.parent().unwrap()).unwrap();
        Some(t)
    }

    /// A detached 200-column session running `cmd` (in `dir`, if given).
    pub fn session(&self, name: &str, dir: Option<&str>, cmd: &str) {
        let mut args = vec!["new-session", "-d", "-x", "200", "-y", "50", "-s", name];
        if let Some(d) = dir {
            args.extend(["-c", d]);
        }
        args.push(cmd);
        let out = self.cmd(&args);
        assert!(out.status.success(), "tmux new-session {name}: {out:?}");
    }

    pub fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .args(args)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .output()
            .expect("tmux runs")
    }

    pub fn has(&self, session: &str) -> bool {
        self.cmd(&["has-session", "-t", &format!("={session}")])
            .status
            .success()
    }

    /// The pane's text with wrapped lines joined, and some history.
    pub fn pane(&self, session: &str) -> String {
        let o = self.cmd(&["capture-pane", "-p", "-J", "-S", "-200", "-t", session]);
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}
