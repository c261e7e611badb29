//! Running git without a person at hand: `git -C <dir> <args>`, stdin
//! closed and no terminal prompt (a credential prompt would hang a daemon or
//! a helper forever), output captured. What the answers mean is the
//! caller's: the commit checks of a `git_handoff` (`protocol::gitcheck`),
//! finding the project (`protocol::root`), the bridge's pushes, a role's
//! branch. The launcher's `launch::repo`, doctor, reservations and the demo
//! still start git themselves (with prompts allowed, for a person's
//! `swarm init`); moving them here is left to do.

use std::path::Path;
use std::process::{Command, Stdio};

/// What one git run said.
#[derive(Debug)]
pub struct Reply {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs git in `dir` with `env` added; Err only when git could not be run.
pub fn call_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Reply, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .envs(env.iter().copied())
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    Ok(Reply {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Runs git in `dir`; Err only when git could not be run.
pub fn call(dir: &Path, args: &[&str]) -> Result<Reply, String> {
    call_with(dir, args, &[])
}

/// Runs git in `dir`: its trimmed stdout, or its stderr (or which command
/// failed, when it said nothing) as the error.
pub fn stdout(dir: &Path, args: &[&str]) -> Result<String, String> {
    let r = call(dir, args)?;
    if r.ok {
        return Ok(r.stdout.trim().to_string());
    }
    let err = r.stderr.trim();
    Err(if err.is_empty() {
        format!("git {} failed", args.first().unwrap_or(&""))
    } else {
        err.to_string()
    })
}
