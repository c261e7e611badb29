//! Test fixtures: temp projects built fluently, the real binaries run as a
//! role from any directory, assertions on output and the file tree, and
//! deadlines (never fixed sleeps).
//!
//! - `project`: [`Project::builder`] with [`Role`]s in either [`Layout`]
//!   (`swarm init`'s pointer, or SwarmForge's copied roles.tsv), the daemon;
//! - `run`: [`Project::cmd`] runs a real binary as a role from its worktree
//!   (or `.at(dir)`), with expectations checked by `.run()`;
//! - `drafts`: drafts to send ([`Project::send_as`]) and notes published
//!   complete-or-absent ([`post`], [`publish`]);
//! - `assertions`: folder listings, headers, [`assert_gone`], [`assert_count`];
//! - `require`: [`require_tool`] and [`require_capability`] (skip with a NOTE,
//!   fail under `CI=true`); `tmux`, `guard`: a private tmux server, and a
//!   guard that stops a swarm even when the test panics;
//! - `model_server`: a scripted model on 127.0.0.1 for the real agent CLIs;
//! - `first_run`: Claude Code's first-start pages answered in the pane, as a
//!   person answers them (a test HOME never ran Claude Code);
//! - `userland`: an ordinary user's account, with its own copies of the
//!   binaries and agent CLIs and the distribution's bubblewrap.
//!
//! ```ignore
//! let p = Project::builder()
//!     .role("coder")                                  // the main worktree
//!     .role(Role::new("reviewer").worktree("rev"))    // .worktrees/rev
//!     .config("wake: {method: none}\n")
//!     .build();
//! let queued = p.send_as("coder", "type: note\nto: reviewer\npriority: 50\nmessage: hi\n").queued();
//! p.deliver_once().ok();
//! assert_gone(&queued);
//! p.cmd("ready-next").role("reviewer").code(0).stdout_has("TASK: ").run();
//! assert_count(&p.hq("rev", "inbox/in_process"), 1);
//! ```

#![allow(dead_code)]

mod assertions;
mod drafts;
mod first_run;
mod guard;
pub mod model_server;
mod project;
mod require;
mod run;
mod tmux;
mod userland;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub use assertions::*;
pub use drafts::*;
pub use first_run::*;
pub use guard::SwarmGuard;
pub use model_server::{ModelServer, Step};
pub use project::*;
pub use require::*;
pub use run::*;
pub use tmux::Tmux;
pub use userland::*;

pub fn bin(name: &str) -> PathBuf {
    match name {
        "swarm-handoff" => PathBuf::from(env!("CARGO_BIN_EXE_swarm-handoff")),
        "ready-next" => PathBuf::from(env!("CARGO_BIN_EXE_ready-next")),
        "done-current" => PathBuf::from(env!("CARGO_BIN_EXE_done-current")),
        "handoffd" => PathBuf::from(env!("CARGO_BIN_EXE_handoffd")),
        "swarm" => PathBuf::from(env!("CARGO_BIN_EXE_swarm")),
        other => panic!("unknown binary {other}"),
    }
}

/// The directory holding the binaries (for PATH in scripted agents).
pub fn bin_dir() -> PathBuf {
    bin("swarm").parent().unwrap().to_path_buf()
}

/// Waits for `cond` until `timeout`; panics with `what` on timeout.
pub fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    while Instant::now() < end {
        if cond() {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    assert!(cond(), "timed out after {timeout:?} waiting for: {what}");
}

pub const DEADLINE: Duration = Duration::from_secs(20);

/// A command with the environment SwarmForge's tests use: PATH,
/// GIT_CONFIG_NOSYSTEM, SWARM_BWRAP (the bubblewrap that confines agents,
/// [`bwrap`]) and (optionally) SWARMFORGE_ROLE; no HOME.
pub fn clean_command(program: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(program);
    c.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com");
    if let Some(b) = bwrap() {
        c.env("SWARM_BWRAP", b);
    }
    c
}

pub fn git(cwd: &Path, args: &[&str]) -> String {
    let out = clean_command(Path::new("git"), cwd)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether `git <args>` succeeds in `cwd` (an object is there, a ref
/// resolves).
pub fn git_ok(cwd: &Path, args: &[&str]) -> bool {
    clean_command(Path::new("git"), cwd)
        .args(args)
        .output()
        .expect("git runs")
        .status
        .success()
}

/// handoffd.log lines (without the time stamp) whose event word is `word`.
pub fn log_lines(log: &str, word: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.split(' ').nth(1) == Some(word))
        .map(|l| l.split_once(' ').unwrap().1.to_string())
        .collect()
}

pub fn log_count(log: &str, word: &str) -> usize {
    log_lines(log, word).len()
}

/// RFC 3339 UTC with microseconds, `2026-06-15T14:05:31.123456Z` (D4).
/// Tomorrow's day (UTC) as `swarm archive --before` takes it: archiving
/// before it moves everything made today.
pub fn tomorrow() -> String {
    (chrono::Utc::now() + chrono::Duration::days(1))
        .format("%Y-%m-%d")
        .to_string()
}

pub fn is_iso_micros(s: &str) -> bool {
    s.len() == 27
        && s.as_bytes()[19] == b'.'
        && s.ends_with('Z')
        && chrono::DateTime::parse_from_rfc3339(s).is_ok()
}

/// Copies a folder tree (files and folders only).
/// Gives `path` and everything under it (symlinks themselves, not their
/// targets) to `(uid, gid)`.
pub fn chown_tree(path: &Path, (uid, gid): (u32, u32)) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
    if std::fs::symlink_metadata(path).unwrap().is_dir() {
        for e in std::fs::read_dir(path).unwrap().flatten() {
            chown_tree(&e.path(), (uid, gid));
        }
    }
}

pub fn copy_tree(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for e in fs::read_dir(src).unwrap().flatten() {
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// `examples/swarm/<name>` in this repository.
pub fn example_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/swarm")
        .join(name)
}

/// xorshift64*: reproducible from a printed seed, no extra dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Sends `sig` to a process we started.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid of our own child, which has not been reaped.
    let rc = unsafe { libc::kill(pid as libc::pid_t, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}
