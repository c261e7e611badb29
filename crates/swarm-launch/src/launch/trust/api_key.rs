//! Claude Code's "Detected a custom API key … Do you want to use this API
//! key?" dialog: shown while `ANTHROPIC_API_KEY` is set and `~/.claude.json`
//! holds no answer for it. `trust` records the person's "Yes" where Claude
//! Code does: the key's last 20 characters in
//! `customApiKeyResponses.approved`.
//!
//! Invariant: never the key itself is written; a "No" the person gave is
//! left alone; `untrust` removes only the suffix of the key it runs with.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::record::{remember, save_records};
use super::store::{bad, read, write};
use super::{cli_of, Change, Done, Stores};
use crate::error::Result;
use crate::launch::agents::Cli;
use crate::launch::plan::{AgentSpec, Plan};

/// The record of an API-key consent `trust` added:
/// `claude-api-key<TAB><file><TAB>ANTHROPIC_API_KEY` (the key's suffix is
/// not written here: `untrust` removes the suffix of the key it is run
/// with).
pub(super) const CLAUDE_API_KEY: &str = "claude-api-key";
/// Where Claude Code finds the key whose use it asks about.
pub(super) const API_KEY_VAR: &str = "ANTHROPIC_API_KEY";

/// Claude Code roles that will ask "Do you want to use this API key?":
/// `ANTHROPIC_API_KEY` is set and the person's file holds no answer for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    /// The interactive Claude Code roles (a headless one, `claude -p`,
    /// uses the key unasked).
    pub roles: Vec<String>,
    /// Where Claude Code keeps the answer (`~/.claude.json`).
    pub file: PathBuf,
}

/// The interactive Claude Code roles among `roles` (every role when empty).
pub(super) fn api_key_roles(plan: &Plan, roles: &[String]) -> Vec<String> {
    plan.roles
        .iter()
        .filter(|r| roles.is_empty() || roles.contains(&r.name))
        .filter(|r| cli_of(r) == Some(Cli::Claude))
        .filter(|r| !matches!(r.agent, AgentSpec::Preset { headless: true, .. }))
        .map(|r| r.name.clone())
        .collect()
}

/// The person's answer for the key of `suffix` in Claude Code's `file`:
/// Some(true) approved, Some(false) rejected, None not asked yet.
pub(super) fn api_key_answer(
    text: Option<&str>,
    file: &Path,
    suffix: &str,
) -> Result<Option<bool>> {
    let Some(text) = text else { return Ok(None) };
    let v: Value = serde_json::from_str(text).map_err(|e| bad(file, e))?;
    let has = |list: &str| {
        v["customApiKeyResponses"][list]
            .as_array()
            .is_some_and(|a| a.iter().any(|k| k == suffix))
    };
    Ok(if has("approved") {
        Some(true)
    } else if has("rejected") {
        Some(false)
    } else {
        None
    })
}

/// `text` with `suffix` added to (`on`) or removed from the approved keys.
pub(super) fn edit_api_key(
    text: Option<&str>,
    file: &Path,
    suffix: &str,
    on: bool,
) -> Result<String> {
    let mut v: Value = match text {
        Some(t) => serde_json::from_str(t).map_err(|e| bad(file, e))?,
        None => json!({}),
    };
    let Some(m) = v.as_object_mut() else {
        return Err(bad(file, "not a JSON object"));
    };
    let r = m
        .entry("customApiKeyResponses")
        .or_insert_with(|| json!({"approved": [], "rejected": []}));
    let Some(r) = r.as_object_mut() else {
        return Err(bad(file, "`customApiKeyResponses` is not an object"));
    };
    r.entry("rejected").or_insert_with(|| json!([]));
    let approved = r.entry("approved").or_insert_with(|| json!([]));
    let Some(approved) = approved.as_array_mut() else {
        return Err(bad(file, "`customApiKeyResponses.approved` is not a list"));
    };
    approved.retain(|k| k != suffix);
    if on {
        approved.push(json!(suffix));
    }
    let mut out = serde_json::to_string_pretty(&v).map_err(|e| bad(file, e))?;
    out.push('\n');
    Ok(out)
}

pub(super) fn api_key_change(roles: &[String], file: &Path, done: Done) -> Change {
    Change {
        role: roles.join(", "),
        cli: Cli::Claude,
        file: file.to_path_buf(),
        key: format!("customApiKeyResponses.approved (the last 20 characters of {API_KEY_VAR})"),
        done,
    }
}

/// Records the person's consent to the key in `ANTHROPIC_API_KEY` for the
/// Claude Code roles among `roles`; a "No" they gave is left alone.
pub(super) fn trust_api_key(
    plan: &Plan,
    roles: &[String],
    stores: &Stores,
    recs: &mut Vec<(String, PathBuf, PathBuf)>,
) -> Result<Vec<Change>> {
    let (Some(suffix), names) = (&stores.claude_api_key, api_key_roles(plan, roles)) else {
        return Ok(Vec::new());
    };
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let file = &stores.claude;
    let text = read(file)?;
    let done = match api_key_answer(text.as_deref(), file, suffix)? {
        Some(true) => Done::Already,
        Some(false) => Done::Declined,
        None => {
            write(file, &edit_api_key(text.as_deref(), file, suffix, true)?)?;
            remember(
                plan,
                recs,
                (
                    CLAUDE_API_KEY.to_string(),
                    file.clone(),
                    PathBuf::from(API_KEY_VAR),
                ),
            )?;
            Done::Added
        }
    };
    Ok(vec![api_key_change(&names, file, done)])
}

/// Removes the API-key consent `trust` recorded (with every role only: it
/// is the person's, not one role's), for the key `untrust` is run with.
pub(super) fn untrust_api_key(
    plan: &Plan,
    roles: &[String],
    stores: &Stores,
    recs: &mut Vec<(String, PathBuf, PathBuf)>,
) -> Result<Vec<Change>> {
    let file = &stores.claude;
    let rec = (
        CLAUDE_API_KEY.to_string(),
        file.clone(),
        PathBuf::from(API_KEY_VAR),
    );
    let Some(suffix) = &stores.claude_api_key else {
        return Ok(Vec::new());
    };
    if !roles.is_empty() || !recs.contains(&rec) {
        return Ok(Vec::new());
    }
    let text = read(file)?;
    let done = if api_key_answer(text.as_deref(), file, suffix)? == Some(true) {
        write(file, &edit_api_key(text.as_deref(), file, suffix, false)?)?;
        Done::Removed
    } else {
        Done::Absent
    };
    recs.retain(|r| r != &rec);
    save_records(plan, recs)?;
    Ok(vec![api_key_change(&api_key_roles(plan, &[]), file, done)])
}

/// The Claude Code roles that will wait at the API-key dialog, for
/// `swarm trust --check` and `swarm doctor`; a file that cannot be read
/// counts as no answer.
pub fn unanswered_api_key(plan: &Plan, stores: &Stores) -> Option<ApiKey> {
    let suffix = stores.claude_api_key.as_ref()?;
    let roles = api_key_roles(plan, &[]);
    let file = &stores.claude;
    let text = read(file).ok().flatten();
    let answered = api_key_answer(text.as_deref(), file, suffix)
        .ok()
        .flatten()
        .is_some();
    (!roles.is_empty() && !answered).then(|| ApiKey {
        roles,
        file: file.clone(),
    })
}
