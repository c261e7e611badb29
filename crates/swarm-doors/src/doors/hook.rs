//! `swarm hook <cli> <event>`: a CLI's turn-end hook. When mail waits for the
//! role and nothing is in process, the agent is told to run
//! `ready_for_next.sh` instead of ending its turn; otherwise the turn ends.
//!
//! Bounded, so it can never keep an agent going forever: a continuation
//! (`stop_hook_active`) is refused when the waiting mail is exactly what it
//! was when we last asked (the agent did not take it), and after
//! [`MAX_CONTINUATIONS`] in a row. Anything unexpected (no role, no project,
//! unreadable input, a swarm that is down) lets the turn end: a hook left
//! behind after `swarm down` is harmless.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::fsx;
pub use crate::launch::agents::hook_input::{parse_input, Input, MAX_INPUT};
use crate::launch::agents::Cli;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;

/// Continuations in a row before the hook lets the turn end regardless.
pub const MAX_CONTINUATIONS: u32 = 5;

/// The instruction a waiting role is given, in the words of the way it
/// takes work: the wrappers, or (`mcp: true`) the swarm server's tools.
pub fn continue_reason(role: &str, mcp: bool) -> String {
    if mcp {
        format!(
            "New handoff mail is waiting for role {role}. Call the swarm tool `next` now, do the item it gives you, then call `done`."
        )
    } else {
        format!(
            "New handoff mail is waiting for role {role}. Run ready_for_next.sh now, do the item it prints, then run done_with_current.sh."
        )
    }
}

fn state_file(project: &Project, role: &str) -> PathBuf {
    crate::protocol::launch_files::agent_own_dir(project, role).join("hook")
}

/// The names waiting in `new/`, as one fingerprint (sorted, so order of
/// listing does not matter).
fn fingerprint(worktree: &Path) -> String {
    let mut names: Vec<String> = crate::protocol::store::each(&Worktree::new(worktree).inbox_new())
        .filter(|e| e.is_handoff_named())
        .map(|e| e.name)
        .collect();
    names.sort();
    format!(
        "{:08x}",
        crate::protocol::tmux_socket::crc32(names.join("/").as_bytes())
    )
}

fn read_state(f: &Path) -> (u32, String) {
    let text = fsx::read_bounded(f, 4096)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let mut w = text.split_whitespace();
    let n = w.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    (n, w.next().unwrap_or("").to_string())
}

/// Keep the agent going (Some(reason)) or let its turn end (None), with a
/// note for stderr saying why when that helps.
pub fn decide(project: &Project, role: &str, input: &Input) -> (Option<String>, Option<String>) {
    let roles = match Roles::load(&project.roles_tsv()) {
        Ok(r) => r,
        Err(e) => return (None, Some(e.to_string())),
    };
    let Some(r) = roles.roles.iter().find(|r| r.name == role) else {
        return (
            None,
            Some(format!(
                "role {role} is not in {}",
                project.roles_tsv().display()
            )),
        );
    };
    let f = state_file(project, role);
    if !crate::daemon::wake::still_waiting(&r.worktree_path) {
        let _ = fsx::remove_file(&f);
        return (None, None);
    }
    let fp = fingerprint(&r.worktree_path);
    let (count, last) = read_state(&f);
    if input.stop_hook_active && (last == fp || count >= MAX_CONTINUATIONS) {
        return (
            None,
            Some(format!(
                "mail waits for {role}, but the agent did not take it after being told ({count} in a row); the re-wake sweep will try again"
            )),
        );
    }
    let count = if input.stop_hook_active { count + 1 } else { 1 };
    // Without the daemon folder (a swarm never started here) there is no
    // state to keep, and no loop to fear: the next stop is a fresh one.
    if project.daemon_dir().is_dir() {
        let dir = f.parent().unwrap_or(Path::new("."));
        let _ = fsx::ensure_dirs(&[dir])
            .and_then(|_| fsx::write_file(&f, format!("{count} {fp}\n").as_bytes()));
    }
    let mcp = crate::protocol::config::Config::load(&project.config_file())
        .ok()
        .and_then(|c| c.role(role).map(|r| r.mcp))
        .unwrap_or(false);
    (Some(continue_reason(role, mcp)), None)
}

/// Whether a CLI plugin's copy of the hook (`--plugin`) stands aside in
/// this session: the swarm's own hook runs here too, and two answers to
/// one turn end would count the continuation twice and tell the agent
/// twice. Its answer is then "let the turn end", which the CLI combines
/// with the swarm hook's own.
pub fn plugin_stands_aside(cli: Cli) -> bool {
    let dir = std::env::current_dir().unwrap_or_default();
    crate::launch::agents::own_hook_runs(cli, &dir)
}

/// The full answer: JSON for stdout and an optional note for stderr.
pub fn answer(
    cli: Cli,
    project: Option<&Project>,
    role: Option<&str>,
    stdin: &[u8],
) -> (Value, Option<String>) {
    let input = parse_input(stdin);
    let (keep, note) = match (project, role) {
        (Some(p), Some(r)) if !r.is_empty() => decide(p, r, &input),
        (None, _) => (None, Some("no swarm project found here".to_string())),
        _ => (None, Some("SWARMFORGE_ROLE is not set".to_string())),
    };
    (cli.preset().reply(keep.as_deref()), note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_read_leniently() {
        assert!(parse_input(br#"{"stop_hook_active": true, "x": 1}"#).stop_hook_active);
        assert_eq!(parse_input(b"not json"), Input::default());
        assert_eq!(
            parse_input(br#"{"stop_hook_active": "yes"}"#),
            Input::default()
        );
        assert_eq!(parse_input(&vec![b' '; MAX_INPUT + 1]), Input::default());
    }
}
