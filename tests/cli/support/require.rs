//! Tools and privileges a test needs. Outside CI a missing one makes the test
//! print a `NOTE:` and return; with `CI=true` it fails the test, so no test
//! passes in CI without having run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether we run in CI (the environment variable `CI` is `true`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether `tool` is an executable on PATH. `install` says how to get it,
/// e.g. `apt-get install -y strace`; when it is missing the test is skipped
/// with a NOTE (false), or fails in CI.
#[track_caller]
pub fn require_tool(tool: &str, install: &str) -> bool {
    if on_path(tool) {
        return true;
    }
    missing(&format!("{tool} is not installed"), install);
    false
}

/// The folder holding the pinned agent CLIs (`node_modules/.bin/claude`,
/// ...): `SWARM_AGENT_CLIS`, else `target/agent-clis`, its links resolved.
/// `.ci/run` links `target/agent-clis` to its per-machine cache, and a
/// confined agent's sandbox binds the folder its PATH names, not what a
/// link on the way leads to.
pub fn agent_clis_dir() -> PathBuf {
    let dir = std::env::var_os("SWARM_AGENT_CLIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/agent-clis"));
    std::fs::canonicalize(&dir).unwrap_or(dir)
}

/// Where the pinned ACP adapters are (`claude-agent-acp`, `codex-acp`):
/// `SWARM_ACP_CLIS` when set, else the `target/acp-clis` `.ci/run`
/// installs them into (their own cached folder), resolved as
/// [`agent_clis_dir`] is.
pub fn acp_clis_dir() -> PathBuf {
    let dir = std::env::var_os("SWARM_ACP_CLIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/acp-clis"));
    std::fs::canonicalize(&dir).unwrap_or(dir)
}

/// `probe` is the attempt to get a capability (mount a tmpfs, `chattr +i` on
/// this filesystem, attach strace): its value, or `None` after a NOTE (a
/// failure in CI) naming `what` was tried, why it failed and `install`.
#[track_caller]
pub fn require_capability<T>(what: &str, install: &str, probe: Result<T, String>) -> Option<T> {
    match probe {
        Ok(v) => Some(v),
        Err(why) => {
            // One line: tools like mount explain over several.
            let why = why.trim().replace('\n', "; ");
            missing(&format!("cannot {what} ({why})"), install);
            None
        }
    }
}

#[track_caller]
fn missing(what: &str, install: &str) {
    assert!(
        !in_ci(),
        "CI=true and {what}: this test must run in CI; fix with: {install}"
    );
    eprintln!("NOTE: {what} ({install}); skipping");
}

fn on_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| holds(&d, tool))
}

/// Whether folder `d` holds an executable `tool`.
fn holds(d: &Path, tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    d.join(tool)
        .metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The machine's PATH with no executable `tool` on it: each folder that
/// holds one is replaced by a folder of links to everything else in it
/// (a `/usr/bin` holds git and sh too). For a test of "no `bwrap` on
/// PATH" on a machine that has one, as most Linux desktops do through
/// Flatpak: never rely on the machine's own PATH lacking something.
pub struct PathWithout {
    pub path: String,
    _shadows: Vec<tempfile::TempDir>,
}

pub fn path_without(tool: &str) -> PathWithout {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut shadows = Vec::new();
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .map(|d| {
            if !holds(&d, tool) {
                return d;
            }
            let shadow = tempfile::tempdir().unwrap();
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.file_name() != tool {
                    let _ = std::os::unix::fs::symlink(e.path(), shadow.path().join(e.file_name()));
                }
            }
            let p = shadow.path().to_path_buf();
            shadows.push(shadow);
            p
        })
        .collect();
    PathWithout {
        path: std::env::join_paths(kept)
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        _shadows: shadows,
    }
}

/// The Python of the venv `.ci/run` makes (`target/venv`), or the one
/// `env_var` names, when `python -c "import <modules>"` works there (a
/// NOTE, or a failure in CI, naming `install` otherwise).
#[track_caller]
pub fn venv_python(env_var: &str, modules: &str, sdk: &str, install: &str) -> Option<PathBuf> {
    let p = std::env::var_os(env_var)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/venv/bin/python"));
    let probe = Command::new(&p)
        .args(["-c", &format!("import {modules}")])
        .output()
        .map_err(|e| format!("{}: {e}", p.display()))
        .and_then(|o| {
            if o.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&o.stderr).into_owned())
            }
        });
    require_capability(&format!("import {sdk}"), install, probe)?;
    Some(p)
}

/// The bubblewrap the tests' swarms confine their agents with (agents are
/// confined by default, docs/security.md): Debian's as `.ci/run` unpacks it
/// into `target/bubblewrap` (the same with or without a system one on
/// PATH), else the one the pinned Codex ships, else `bwrap` on PATH. Every
/// test command gets it as `SWARM_BWRAP`; a test run as an ordinary user
/// gets a copy of its own (the checkout may be closed to that user).
pub fn bwrap() -> Option<std::path::PathBuf> {
    static FOUND: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
            let clis = agent_clis_dir();
            [
                target.join("bubblewrap/usr/bin/bwrap"),
                clis.join("node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/codex-resources/bwrap"),
            ]
            .into_iter()
            .find(|p| p.is_file())
            .or_else(|| on_path("bwrap").then(|| "bwrap".into()))
        })
        .clone()
}

/// [`bwrap`], or None after a NOTE (a failure in CI).
#[track_caller]
pub fn require_bwrap() -> Option<std::path::PathBuf> {
    let b = bwrap();
    if b.is_none() {
        missing(
            "no bubblewrap for confined agents",
            "run .ci/run (it unpacks Debian's bubblewrap into target/bubblewrap), or apt-get install -y bubblewrap",
        );
    }
    b
}
