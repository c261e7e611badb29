//! `.swarmforge/lineup.json`: the roles added to and removed from a swarm
//! while it runs, merged with swarm.yaml's `roles:` by every reader
//! (`Config::load`). Only `swarm role add/remove` (and the daemon acting on
//! a `seat_request` through them) write it, under [`lock`]; every write is a
//! whole new file (fsx temp + fsync + rename).
//!
//! Invariant: a role named in `removed` is in no table (roles.tsv, the
//! merged config); a role in `leaving` still is, but the daemon refuses new
//! mail for it while its waiting mail goes back to its senders.

use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::config::{Config, MAX_CONFIG_BYTES};
pub use crate::protocol::config::{Retired, Seats};
use crate::protocol::layout::Project;
use crate::protocol::roles::{ReceiveMode, Role, Roles};

pub fn file(project: &Project) -> PathBuf {
    project.swarmforge().join("lineup.json")
}

fn lock_file(project: &Project) -> PathBuf {
    project.swarmforge().join("lineup.lock")
}

/// The generation the daemon last acted on (written by the daemon).
pub fn seen_file(project: &Project) -> PathBuf {
    project.daemon_dir().join("lineup-seen")
}

fn supervised_file(project: &Project) -> PathBuf {
    project.daemon_dir().join("lineup-supervised")
}

/// Serialises every change of the lineup (an OS lock: a killed holder
/// releases it).
pub fn lock(project: &Project) -> Result<fsx::Lock> {
    let f = lock_file(project);
    fsx::ensure_dirs(&[project.swarmforge()]).at(project.swarmforge())?;
    fsx::lock(&f).at(&f)
}

/// The stored changes; none when the file is missing.
pub fn load(project: &Project) -> Result<Seats> {
    let f = file(project);
    let bytes = match fsx::read_bounded(&f, MAX_CONFIG_BYTES) {
        Ok(b) => b,
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Seats::default())
        }
        Err(e) => return Err(Error::bad_file(&f, e)),
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::bad_file_hint(&f, format!("{e}"), "this file is written by `swarm role add/remove`; restore it from a backup, or delete it to fall back to swarm.yaml's roles")
    })
}

/// Writes `seats` with the next generation (call under [`lock`]).
pub fn save(project: &Project, seats: &mut Seats) -> Result<()> {
    // Past any generation acknowledged before (a lineup file deleted and
    // started again must not look acknowledged already).
    seats.generation = seats.generation.max(acknowledged(project)) + 1;
    let f = file(project);
    let mut json = serde_json::to_vec_pretty(seats).map_err(|e| Error::internal(e.to_string()))?;
    json.push(b'\n');
    fsx::write_file(&f, &json).at(&f)
}

/// Merges the stored changes into a config read from `path` (swarm.yaml at
/// a project root).
pub fn merge(config: &mut Config, path: &Path) -> Result<()> {
    let Some(root) = path.parent() else {
        return Ok(());
    };
    let root = if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        root
    };
    let seats = load(&Project::new(root))?;
    apply(config, seats);
    Ok(())
}

/// The daemon acts on `generation` from now on (`swarm role` waits for it).
/// Written only when it changes: a reload on a project being deleted (its
/// roles.tsv gone) writes nothing there.
pub fn acknowledge(project: &Project, generation: u64) {
    if acknowledged(project) != generation {
        write_seen(&seen_file(project), generation);
    }
}

/// The headless supervisor runs the agents of `generation` from now on.
pub fn acknowledge_supervised(project: &Project, generation: u64) {
    if supervised(project) != generation {
        write_seen(&supervised_file(project), generation);
    }
}

fn write_seen(f: &Path, generation: u64) {
    // Never brings back the folder of a project being deleted.
    if !f.parent().is_some_and(Path::is_dir) {
        return;
    }
    if let Err(e) = fsx::write_file(f, format!("{generation}\n").as_bytes()) {
        eprintln!("cannot write {}: {e}", f.display());
    }
}

fn read_seen(f: &Path) -> u64 {
    std::fs::read_to_string(f)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The generation the daemon last acknowledged (0: none).
pub fn acknowledged(project: &Project) -> u64 {
    read_seen(&seen_file(project))
}

/// The generation the headless supervisor last acknowledged (0: none).
pub fn supervised(project: &Project) -> u64 {
    read_seen(&supervised_file(project))
}

/// `roles` with the removed roles after them, so what reads history
/// (audits, transcripts) still finds their worktrees.
pub fn with_retired(roles: Roles, seats: &Seats) -> Roles {
    let problems = roles.problems;
    let mut all = roles.roles;
    for r in &seats.removed {
        if all.iter().any(|o| o.name == r.name) {
            continue;
        }
        all.push(Role {
            name: r.name.clone(),
            worktree_name: r.worktree_name.clone(),
            worktree_path: r.worktree_path.clone(),
            session: String::new(),
            display: crate::protocol::roles::display_name(&r.name),
            agent: RETIRED_AGENT.into(),
            mode: ReceiveMode::Task.as_str().into(),
        });
    }
    let mut out = Roles::from_roles(all);
    out.problems = problems;
    out
}

/// The agent column of a removed role read back for history.
pub const RETIRED_AGENT: &str = "retired";

/// swarm.yaml's roles, minus the removed ones, plus the added ones.
pub fn apply(config: &mut Config, seats: Seats) {
    config.roles.retain(|r| seats.retired(&r.name).is_none());
    for a in &seats.added {
        if config.role(&a.name).is_none() && seats.retired(&a.name).is_none() {
            config.roles.push(a.clone());
        }
    }
    config.seats = seats;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::config::RoleConfig;

    #[test]
    fn removed_roles_leave_and_added_ones_join_without_overruling_the_file() {
        let mut c = Config::parse(
            "roles:\n  - name: a\n    agent: sh a.sh\n  - name: b\n    agent: sh b.sh\n",
        )
        .unwrap();
        let seats = Seats {
            generation: 3,
            added: vec![
                RoleConfig {
                    name: "c".into(),
                    agent: "sh c.sh".into(),
                    ..RoleConfig::default()
                },
                RoleConfig {
                    name: "a".into(),
                    agent: "sh other.sh".into(),
                    ..RoleConfig::default()
                },
            ],
            leaving: vec![],
            removed: vec![Retired {
                name: "b".into(),
                ..Retired::default()
            }],
        };
        apply(&mut c, seats);
        let names: Vec<&str> = c.roles.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(c.role("a").unwrap().agent, "sh a.sh");
        assert!(c.seats.refusal("b").unwrap().contains("was removed"));
    }
}
