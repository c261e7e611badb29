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
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| {
        Path::new(&d)
            .join(tool)
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
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
