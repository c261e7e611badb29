//! The turn-end hook `swarm up` gives a Codex role: Codex runs a hook only
//! once its hash is trusted in `config.toml` (`[hooks.state."<key>"]`).
//! `trust` records the hash Codex itself reports (launch::agents::codex_hooks).
//!
//! Invariant: recorded as `codex-hook` beside the folder trust's `codex`
//! line, so `untrust` removes only what `trust` added; a command-line
//! hook's key, shared by every such role, goes with the last of them.

use std::path::{Path, PathBuf};

use super::record::{remember, save_records};
use super::store::{bad, read, write};
use serde_json::json;

use super::{Change, Done, Need};
use crate::error::Result;
use crate::launch::agents::{codex_hooks, hook_command, setup, Cli};
use crate::launch::plan::Plan;
use crate::launch::shims::own_bin_dir;

/// The record of a Codex hook trust `trust` added (its own kind, beside
/// the folder trust's `codex`).
pub(super) const CODEX_HOOK: &str = "codex-hook";

/// The key prefix of every hook of `folder`'s `.codex/hooks.json`.
pub(super) fn hook_prefix(folder: &Path) -> String {
    format!("{}:", folder.join(".codex").join("hooks.json").display())
}

/// Trusts the turn-end hook `swarm up` gives a Codex role, with the hash
/// Codex itself reports (launch::agents::codex_hooks): on the command line
/// for most roles, in the role's own CODEX_HOME for `mcp: true` (whose hook
/// file is written first, exactly as `swarm up` writes it).
pub(super) fn trust_codex_hook(
    plan: &Plan,
    n: &Need,
    file: &Path,
    recs: &mut Vec<(String, PathBuf, PathBuf)>,
) -> Result<Vec<Change>> {
    let Some(r) = plan.roles.iter().find(|r| r.name == n.role) else {
        return Ok(Vec::new());
    };
    let bin = own_bin_dir()?;
    let ours = hook_command(&bin, Cli::Codex);
    let mcp = plan.config.role(&r.name).is_some_and(|c| c.mcp);
    let (args, prefix) = if mcp {
        setup::install_hook(Cli::Codex, &r.worktree_path, &bin)?;
        (Vec::new(), hook_prefix(&n.folder))
    } else {
        (
            vec!["-c".to_string(), codex_hooks::session_hook(&ours)],
            codex_hooks::SESSION_FLAGS.to_string(),
        )
    };
    let change = |key: String, done: Done| Change {
        role: n.role.clone(),
        cli: n.cli,
        file: file.to_path_buf(),
        key,
        done,
    };
    let home = file.parent().unwrap_or(Path::new("."));
    let listed = match codex_hooks::list("codex", &args, home, &n.folder) {
        Ok(l) => l,
        Err(e) => {
            return Ok(vec![change(
                format!(
                    "[hooks.state] ({e}; `swarm attach {} --choose` answers Codex's hook review instead)",
                    n.role
                ),
                Done::Failed,
            )])
        }
    };
    let mut out = Vec::new();
    for h in listed
        .iter()
        .filter(|h| h.key.starts_with(&prefix) && h.command == ours)
    {
        let key = format!("[hooks.state.{}] trusted_hash", json!(h.key));
        if h.trusted {
            out.push(change(key, Done::Already));
            continue;
        }
        let text = read(file)?.unwrap_or_default();
        let new =
            codex_hooks::with_trust(&text, &h.key, &h.current_hash).map_err(|e| bad(file, e))?;
        write(file, &new)?;
        remember(
            plan,
            recs,
            (CODEX_HOOK.to_string(), file.to_path_buf(), n.folder.clone()),
        )?;
        out.push(change(key, Done::Added));
    }
    Ok(out)
}

/// Removes the Codex hook trust `trust` recorded for `n` (a command-line
/// hook's trust is one key per store, shared by every such role: removed
/// with the last of them). None when none was recorded.
pub(super) fn untrust_codex_hook(
    plan: &Plan,
    n: &Need,
    file: &Path,
    recs: &mut Vec<(String, PathBuf, PathBuf)>,
) -> Result<Option<Change>> {
    let hook_rec = (CODEX_HOOK.to_string(), file.to_path_buf(), n.folder.clone());
    if n.cli != Cli::Codex || !recs.contains(&hook_rec) {
        return Ok(None);
    }
    recs.retain(|r| r != &hook_rec);
    let shared = recs.iter().any(|(c, f, _)| c == CODEX_HOOK && f == file);
    let mcp = plan.config.role(&n.role).is_some_and(|c| c.mcp);
    let prefix = if mcp {
        hook_prefix(&n.folder)
    } else {
        codex_hooks::SESSION_FLAGS.to_string()
    };
    let removed = if !mcp && shared {
        0
    } else {
        let text = read(file)?.unwrap_or_default();
        let (new, removed) =
            codex_hooks::without_trust(&text, &prefix).map_err(|e| bad(file, e))?;
        if removed > 0 {
            write(file, &new)?;
        }
        removed
    };
    save_records(plan, recs)?;
    Ok(Some(Change {
        role: n.role.clone(),
        cli: n.cli,
        file: file.to_path_buf(),
        key: format!("[hooks.state.\"{prefix}…\"]"),
        done: if removed > 0 {
            Done::Removed
        } else {
            Done::Absent
        },
    }))
}
