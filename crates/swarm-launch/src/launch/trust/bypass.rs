//! Claude Code's bypass-permissions disclaimer: a role with `permission:
//! full` shows it at its first start until its worktree's local settings
//! (`<worktree>/.claude/settings.local.json`) record the person's consent,
//! `skipDangerousModePermissionPrompt: true`.
//!
//! Invariant: the consent is written for that role's worktree only, never
//! in the user's settings (which would cover every project); a consent the
//! person gave in Claude Code itself is left alone.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::record::{remember, save_records};
use super::store::{bad, read, write};
use super::{Change, Done, Stores};
use crate::error::Result;
use crate::launch::agents::claude_root::bypasses;
use crate::launch::agents::Cli;
use crate::launch::plan::Plan;

/// The record of a Claude Code bypass-permissions consent `trust` added.
pub(super) const CLAUDE_BYPASS: &str = "claude-bypass";
/// Claude Code's setting for "the person accepted the bypass disclaimer".
pub(super) const BYPASS_KEY: &str = "skipDangerousModePermissionPrompt";

/// One Claude Code role with `permission: full`: it shows the bypass
/// disclaimer until its worktree's local settings record consent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bypass {
    pub role: String,
    /// `<worktree>/.claude/settings.local.json`.
    pub file: PathBuf,
    pub folder: PathBuf,
}

/// The Claude Code roles with `permission: full` among `roles` (every role
/// when empty).
pub(super) fn bypass_roles(plan: &Plan, roles: &[String]) -> Vec<Bypass> {
    plan.roles
        .iter()
        .filter(|r| roles.is_empty() || roles.contains(&r.name))
        .filter(|r| bypasses(r))
        .map(|r| {
            let folder = r
                .worktree_path
                .canonicalize()
                .unwrap_or_else(|_| r.worktree_path.clone());
            Bypass {
                role: r.name.clone(),
                file: folder.join(".claude/settings.local.json"),
                folder,
            }
        })
        .collect()
}

/// Whether the settings file `file` holds the bypass acceptance.
pub(super) fn holds_consent(file: &Path) -> Result<bool> {
    Ok(match read(file)? {
        Some(t) => {
            let v: Value = serde_json::from_str(&t).map_err(|e| bad(file, e))?;
            v[BYPASS_KEY] == true
        }
        None => false,
    })
}

pub(super) fn consented(b: &Bypass) -> Result<bool> {
    holds_consent(&b.file)
}

/// The person accepted the disclaimer in Claude Code itself, which records
/// it in the user settings (for every project): no worktree needs ours.
pub(super) fn accepted_by_user(stores: &Stores) -> bool {
    holds_consent(&stores.claude_settings).unwrap_or(false)
}

/// `b`'s local settings with the consent set (`on`) or removed.
pub(super) fn set_consent(b: &Bypass, on: bool) -> Result<()> {
    let mut v: Value = match read(&b.file)? {
        Some(t) => serde_json::from_str(&t).map_err(|e| bad(&b.file, e))?,
        None => json!({}),
    };
    let Some(m) = v.as_object_mut() else {
        return Err(bad(&b.file, "not a JSON object"));
    };
    if on {
        m.insert(BYPASS_KEY.into(), json!(true));
    } else {
        m.remove(BYPASS_KEY);
    }
    let mut out = serde_json::to_string_pretty(&v).map_err(|e| bad(&b.file, e))?;
    out.push('\n');
    write(&b.file, &out)
}

pub(super) fn bypass_change(b: &Bypass, done: Done) -> Change {
    Change {
        role: b.role.clone(),
        cli: Cli::Claude,
        file: b.file.clone(),
        key: format!("{BYPASS_KEY} (permission: full)"),
        done,
    }
}

/// Records the bypass consent of `roles`' Claude Code `permission: full`
/// roles.
pub(super) fn trust_bypass(
    plan: &Plan,
    roles: &[String],
    stores: &Stores,
    recs: &mut Vec<(String, PathBuf, PathBuf)>,
) -> Result<Vec<Change>> {
    let mut out = Vec::new();
    let by_user = accepted_by_user(stores);
    for mut b in bypass_roles(plan, roles) {
        let done = if by_user {
            b.file = stores.claude_settings.clone();
            Done::Already
        } else if consented(&b)? {
            Done::Already
        } else {
            set_consent(&b, true)?;
            remember(
                plan,
                recs,
                (CLAUDE_BYPASS.to_string(), b.file.clone(), b.folder.clone()),
            )?;
            Done::Added
        };
        out.push(bypass_change(&b, done));
    }
    Ok(out)
}

/// Removes the bypass consents `trust` recorded for `roles`.
pub(super) fn untrust_bypass(
    plan: &Plan,
    roles: &[String],
    recs: &mut Vec<(String, PathBuf, PathBuf)>,
) -> Result<Vec<Change>> {
    let mut out = Vec::new();
    for b in bypass_roles(plan, roles) {
        let rec = (CLAUDE_BYPASS.to_string(), b.file.clone(), b.folder.clone());
        if !recs.contains(&rec) {
            continue;
        }
        let done = if consented(&b)? {
            set_consent(&b, false)?;
            Done::Removed
        } else {
            Done::Absent
        };
        recs.retain(|r| r != &rec);
        save_records(plan, recs)?;
        out.push(bypass_change(&b, done));
    }
    Ok(out)
}

/// The Claude Code `permission: full` roles that will show the bypass
/// disclaimer (no consent recorded, neither ours nor the person's own),
/// for `swarm doctor`.
pub fn unconsented(plan: &Plan, stores: &Stores) -> Vec<Bypass> {
    if accepted_by_user(stores) {
        return Vec::new();
    }
    bypass_roles(plan, &[])
        .into_iter()
        .filter(|b| !consented(b).unwrap_or(false))
        .collect()
}
