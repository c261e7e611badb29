//! Will a Codex role's sandbox work on this machine? (docs/agents.md,
//! "Codex and bubblewrap").
//!
//! Codex (0.171) runs each shell command of a sandboxed session (`--sandbox
//! workspace-write`/`read-only`) through bubblewrap, and prefers a `bwrap`
//! found on PATH (Debian's `bubblewrap`, which Flatpak pulls in on most
//! desktops) to the one it ships. Through a system bwrap it starts its
//! helper by name, `codex-linux-sandbox`, which it finds through links it
//! makes under `$CODEX_HOME/tmp/arg0` at start-up. It refuses to make those
//! links when `CODEX_HOME` is inside the temp folder (`$TMPDIR`, else
//! `/tmp`), and then every command fails with `bwrap: execvp
//! codex-linux-sandbox: No such file or directory`; the model sees only
//! failed commands. Found with the real CLI (tests/cli/real_agents.rs): the
//! same swarm works with a system bwrap when CODEX_HOME is outside the temp
//! folder, and with Codex's own bwrap anywhere.
//!
//! So the failure needs three things at once, checked here: a sandboxed
//! Codex role, its CODEX_HOME under the temp folder (a throw-away HOME, or
//! an `mcp: true` role, whose CODEX_HOME is `<worktree>/.codex`, in a
//! project kept under /tmp), and a system bwrap on PATH. `swarm up` warns
//! and `swarm doctor` reports CODEX_SANDBOX_HELPER.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Cli;
use crate::launch::plan::{AgentSpec, Plan};
use crate::protocol::config::Permission;

/// A Codex role whose sandboxed commands will all fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub role: String,
    /// The role's CODEX_HOME, inside `temp`.
    pub codex_home: PathBuf,
    pub temp: PathBuf,
    /// The `bwrap` Codex will take from PATH.
    pub bwrap: PathBuf,
}

impl Problem {
    pub fn message(&self) -> String {
        format!(
            "role {}: every shell command of Codex will fail with `bwrap: execvp codex-linux-sandbox`: its CODEX_HOME {} is inside the temp folder {}, where Codex will not create its sandbox helper, and it prefers the system bubblewrap {} on PATH to its own",
            self.role,
            self.codex_home.display(),
            self.temp.display(),
            self.bwrap.display()
        )
    }

    pub fn fix(&self) -> String {
        "keep CODEX_HOME outside the temp folder (a real HOME, or `export CODEX_HOME=/path/outside/tmp`; for an `mcp: true` role keep the project outside it), or start the swarm with a PATH without that bwrap (Codex then uses its own), or give the role `permission: full` (no sandbox; docs/agents.md)".to_string()
    }
}

/// The problems of `plan`'s Codex roles, with the environment read through
/// `var` (HOME, CODEX_HOME, TMPDIR, PATH).
pub fn problems(plan: &Plan, var: impl Fn(&str) -> Option<OsString>) -> Vec<Problem> {
    let set = |k: &str| var(k).filter(|v| !v.is_empty());
    let temp = set("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let temp = canonical(&temp);
    let Some(bwrap) = set("PATH").and_then(|p| system_bwrap(&p, &temp)) else {
        return Vec::new();
    };
    let user_home = set("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".codex")));
    plan.roles
        .iter()
        .filter_map(|r| {
            let sandboxed = match &r.agent {
                AgentSpec::Preset {
                    cli: Cli::Codex,
                    permission,
                    ..
                } => *permission != Permission::Full,
                // SwarmForge's `codex` model agent runs with Codex's defaults.
                AgentSpec::Model { name, .. } => name == "codex",
                _ => false,
            };
            if !sandboxed {
                return None;
            }
            let mcp = plan.config.role(&r.name).is_some_and(|c| c.mcp);
            let home = if mcp {
                r.worktree_path.join(".codex")
            } else {
                user_home.clone()?
            };
            let home = canonical(&home);
            home.starts_with(&temp).then(|| Problem {
                role: r.name.clone(),
                codex_home: home,
                temp: temp.clone(),
                bwrap: bwrap.clone(),
            })
        })
        .collect()
}

/// The first executable `bwrap` on `path` outside `temp` (Codex passes over
/// one inside the temp folder, as it does for its own links).
fn system_bwrap(path: &std::ffi::OsStr, temp: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|d| d.is_absolute() && !canonical(d).starts_with(temp))
        .map(|d| d.join("bwrap"))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `p` with its existing ancestors' symlinks resolved (a CODEX_HOME may not
/// exist yet).
fn canonical(p: &Path) -> PathBuf {
    for base in p.ancestors() {
        if let Ok(c) = base.canonicalize() {
            let rest = p.strip_prefix(base).unwrap_or(Path::new(""));
            return c.join(rest);
        }
    }
    p.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_keeps_the_missing_tail() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().canonicalize().unwrap();
        assert_eq!(canonical(&d.path().join("a/b")), real.join("a/b"));
    }

    #[test]
    fn a_bwrap_in_the_temp_folder_is_not_the_system_one() {
        let tmp = tempfile::tempdir().unwrap();
        let temp = tmp.path().canonicalize().unwrap();
        let inside = temp.join("bin");
        std::fs::create_dir_all(&inside).unwrap();
        let b = inside.join("bwrap");
        std::fs::write(&b, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&b, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        assert_eq!(system_bwrap(inside.as_os_str(), &temp), None);
        let other = tempfile::tempdir().unwrap();
        assert_eq!(system_bwrap(inside.as_os_str(), other.path()), Some(b));
    }
}
