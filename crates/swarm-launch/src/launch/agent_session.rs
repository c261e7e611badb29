//! A headless role's conversation: the session id its CLI reported, kept
//! in `.swarmforge/agents/<role>/session` as `<cli> <id>` so the next turn,
//! a restart after a crash and the watchdog's restart all resume it
//! (docs/headless.md). `swarm fresh <role>` removes it.
//!
//! Invariant: what this file holds, and what [`read`] returns, is always a
//! [`valid`] id: it goes on a command line. The file is replaced with
//! fsx::replace (temp + rename), so a reader never sees half an id.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::fsx;
use crate::launch::agents::Cli;
use crate::protocol::launch_files::agent_own_dir;
use crate::protocol::layout::Project;

/// The longest id kept (UUIDs are 36 characters).
pub const MAX_ID: usize = 128;

pub fn path(project: &Project, role: &str) -> PathBuf {
    agent_own_dir(project, role).join("session")
}

/// `<role>/totals`: `<session> <input> <output> <cache read> <cache
/// write>`, the running usage totals a cumulative CLI last reported for
/// that session (launch/turn/totals.rs turns them into per-turn figures).
pub fn totals_path(project: &Project, role: &str) -> PathBuf {
    agent_own_dir(project, role).join("totals")
}

/// An id safe on a command line: 1..=[`MAX_ID`] ASCII letters, digits,
/// `-`, `_` or `.`, not starting with `-` (it would read as an option).
pub fn valid(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID
        && !id.starts_with('-')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The role's session for `cli`, if one is kept and valid. A file naming
/// another CLI (the role's agent changed) or holding anything else is no
/// session: the next turn starts fresh.
pub fn read(project: &Project, role: &str, cli: Cli) -> Option<String> {
    let bytes = fsx::read_bounded(&path(project, role), 4096).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (who, id) = text.trim().split_once(' ')?;
    (who == cli.name() && valid(id)).then(|| id.to_string())
}

/// Keeps `id` as the role's session (refused when not [`valid`]).
pub fn write(project: &Project, role: &str, cli: Cli, id: &str) -> Result<()> {
    if !valid(id) {
        return Err(Error::process(format!(
            "{role}: the {} CLI reported a session id that is not safe to keep ({} characters)",
            cli.name(),
            id.chars().count()
        )));
    }
    let dir = agent_own_dir(project, role);
    fsx::ensure_dirs(&[&dir]).map_err(|e| Error::io(&dir, e))?;
    let p = path(project, role);
    fsx::replace(&dir, &p, format!("{} {id}\n", cli.name()).as_bytes())
        .map_err(|e| Error::io(&p, e))
}

/// Forgets the role's session; returns the line that was kept, if any.
pub fn forget(project: &Project, role: &str) -> Result<Option<String>> {
    let p = path(project, role);
    let old = fsx::read_bounded(&p, 4096)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).trim().to_string());
    fsx::remove_file(&p).map_err(|e| Error::io(&p, e))?;
    Ok(old)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_before_they_are_kept_or_used() {
        assert!(valid("0b7c2f9e-1b2a-4c3d-9e8f-112233445566"));
        assert!(!valid(""));
        assert!(!valid("-rf"));
        assert!(!valid("a b"));
        assert!(!valid("a;rm -rf /"));
        assert!(!valid(&"x".repeat(MAX_ID + 1)));
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path());
        assert!(write(&p, "r", Cli::Claude, "$(x)").is_err());
        write(&p, "r", Cli::Claude, "s-1").unwrap();
        assert_eq!(read(&p, "r", Cli::Claude).as_deref(), Some("s-1"));
        assert_eq!(read(&p, "r", Cli::Codex), None);
        std::fs::write(path(&p, "r"), "claude $(evil)\n").unwrap();
        assert_eq!(read(&p, "r", Cli::Claude), None);
        assert!(forget(&p, "r").unwrap().is_some());
        assert_eq!(forget(&p, "r").unwrap(), None);
    }
}
