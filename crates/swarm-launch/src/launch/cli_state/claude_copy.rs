//! A confined Claude Code's `~/.claude.json` (onboarding, account, trust
//! per folder), sits in the home itself and is replaced by a rename, which a
//! bind of the single file would refuse. The private home gets a copy at each
//! start instead ([`seed_claude_json`]); the agent's changes stay in its
//! copy, except the answers a person gives in the agent's pane, which are
//! kept from the last copy where the person's file has none, so a dialog
//! answered once stays answered ([`carry_answers`]): the entry of its own
//! worktree (the folder trust), the API-key question
//! (`customApiKeyResponses`) and the first start (the onboarding). The copy
//! is the agent's to write, so only those keys are carried, each checked
//! for its shape, and only into the next copy of the same role: never into
//! the person's file (`swarm trust` records the API-key answer there,
//! launch/trust.rs). A person who never ran Claude Code has no file: the
//! copy is then the carried answers alone.
//!
//!
//! Invariant kept here: **nothing the agent wrote reaches the person's
//! file or outlives a restart but the pane's answers**: the person's file
//! is only read; from the agent's last copy (untrusted) only the keys
//! named here are carried, each checked for its shape and bounded, and the
//! person's own answer always wins.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::fsx;

/// Largest `~/.claude.json` copied (a long-used one is a few MB).
const MAX_CLAUDE_JSON: u64 = 64 * 1024 * 1024;

/// Claude Code's `.claude.json` of the person, when it lives in the home
/// itself (not in a `$CLAUDE_CONFIG_DIR`, which is shared whole).
pub fn claude_json(var: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if var("CLAUDE_CONFIG_DIR").is_some_and(|v| !v.is_empty()) {
        return None;
    }
    var("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".claude.json"))
}

/// Writes `copy` (in the role's private home) from the person's `person`
/// file, with the answers given in the agent's pane carried from the last
/// copy ([`carry_answers`]). A person who never ran Claude Code has no
/// file: the copy is then those answers alone, so the first-start dialogs
/// answered in the pane stay answered and nothing else the agent wrote
/// survives a restart. A person's file that is not a JSON object is
/// refused (the agent would start as a new user), naming the file.
pub fn seed_claude_json(person: &Path, copy: &Path, folders: &[&Path]) -> Result<()> {
    // The person's own file, perhaps a link kept by a dotfiles manager.
    let real = person
        .canonicalize()
        .unwrap_or_else(|_| person.to_path_buf());
    let bytes = match fsx::read_bounded(&real, MAX_CLAUDE_JSON) {
        Ok(b) => b,
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => b"{}".to_vec(),
        Err(e) => {
            return Err(Error::bad_file(
                person,
                format!("cannot copy into a confined agent's home: {e}"),
            ))
        }
    };
    let mut doc: Value = serde_json::from_slice(&bytes)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| {
            Error::bad_file_hint(person, "not a JSON object, so a confined Claude Code would start as a new user", "repair or remove the file (Claude Code writes it again), or set `launch: {confine: false}`".to_string())
        })?;
    let last = fsx::read_bounded(copy, MAX_CLAUDE_JSON)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .filter(Value::is_object);
    if let Some(last) = last {
        carry_answers(&mut doc, &last, folders);
    }
    let out = serde_json::to_vec(&doc).map_err(|e| Error::internal(format!("{e}")))?;
    let dir = copy.parent().unwrap_or(Path::new("."));
    fsx::write_private(dir, copy, &out).map_err(|e| Error::io(copy, e))
}

/// The answers of Claude Code's per-folder first-contact questions, as it
/// keeps them in `projects[<folder>]`: the folder trust, the project
/// onboarding, the approval of a CLAUDE.md that includes files outside the
/// folder.
const PROJECT_ANSWERS: &[&str] = &[
    "hasTrustDialogAccepted",
    "hasCompletedProjectOnboarding",
    "hasClaudeMdExternalIncludesApproved",
    "hasClaudeMdExternalIncludesWarningShown",
];

/// Most entries carried per list of `customApiKeyResponses` (a person
/// answers once per key).
const MAX_KEY_ANSWERS: usize = 16;
/// What Claude Code stores of a key: its last 20 characters.
pub const KEY_SUFFIX: usize = 20;

/// Claude Code's record of an API key the person answered for: the key's
/// last [`KEY_SUFFIX`] characters, as it stores them in
/// `customApiKeyResponses` (the whole key when shorter).
pub fn key_suffix(key: &str) -> String {
    let n = key.chars().count();
    key.chars().skip(n.saturating_sub(KEY_SUFFIX)).collect()
}

/// A stored key suffix as Claude Code writes one: 1 to 20 visible ASCII
/// characters.
fn is_suffix(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        (1..=KEY_SUFFIX).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic())
    })
}

/// Carries into `doc` (the person's file, being copied) the answers a
/// person gave in the agent's pane, from `last` (the agent's last copy,
/// untrusted), where the person's own file has none; the person's answer
/// always wins:
///
/// * `projects[<folder>]` for each of `folders` (the agent's worktree and
///   the folders above it up to the project root: Claude Code keeps a
///   worktree's folder trust under its repository's root), when the
///   person's file has no entry for it:
///   the answers of the folder-trust dialog and the other per-folder
///   questions ([`PROJECT_ANSWERS`], booleans only; no other folder's
///   entry, none of its tool or MCP-server lists);
/// * `customApiKeyResponses.approved` / `.rejected`: the "Detected a custom
///   API key" dialog, key suffixes only (at most [`MAX_KEY_ANSWERS`] a
///   list), none the person's file answers the other way;
/// * `hasCompletedOnboarding: true` with its `lastOnboardingVersion`: the
///   first-start onboarding (theme picker, security notes, login method),
///   when the person's file does not say. The theme chosen is not here:
///   Claude Code writes it into the user settings, read-only inside.
pub fn carry_answers(doc: &mut Value, last: &Value, folders: &[&Path]) {
    let Some(m) = doc.as_object_mut() else { return };
    carry_folder_answers(m, last, folders);
    carry_key_answers(m, last);
    carry_onboarding(m, last);
}

/// `projects[<folder>]` for each of `folders` the person's file has no
/// entry for: the [`PROJECT_ANSWERS`] of the last copy's entry, booleans
/// only.
fn carry_folder_answers(m: &mut Map<String, Value>, last: &Value, folders: &[&Path]) {
    for folder in folders {
        let key = folder.to_string_lossy().into_owned();
        let entry: Map<String, Value> = last
            .get("projects")
            .and_then(|p| p.get(&key))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(k, v)| PROJECT_ANSWERS.contains(&k.as_str()) && v.is_boolean())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if entry.is_empty() {
            continue;
        }
        if m.get("projects").is_none_or(|p| !p.is_object()) {
            m.insert("projects".into(), Value::Object(Default::default()));
        }
        if let Some(projects) = m["projects"].as_object_mut() {
            projects.entry(key).or_insert(Value::Object(entry));
        }
    }
}

/// `customApiKeyResponses.approved` / `.rejected`: the last copy's key
/// suffixes the person's file does not answer, at most
/// [`MAX_KEY_ANSWERS`] a list; one both approved and rejected, neither.
fn carry_key_answers(m: &mut Map<String, Value>, last: &Value) {
    let theirs = |m: &Map<String, Value>, list: &str| -> Vec<Value> {
        m.get("customApiKeyResponses")
            .and_then(|r| r.get(list))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (approved, rejected) = (theirs(m, "approved"), theirs(m, "rejected"));
    let answered = |v: &Value| approved.contains(v) || rejected.contains(v);
    let mut carried = [approved.clone(), rejected.clone()];
    for (i, list) in ["approved", "rejected"].iter().enumerate() {
        let from = last
            .get("customApiKeyResponses")
            .and_then(|r| r.get(list))
            .and_then(Value::as_array);
        for v in from.into_iter().flatten().filter(|v| is_suffix(v)) {
            if !answered(v) && !carried[i].contains(v) && carried[i].len() < MAX_KEY_ANSWERS {
                carried[i].push(v.clone());
            }
        }
    }
    // A suffix the pane both approved and rejected: neither.
    let both: Vec<Value> = carried[0]
        .iter()
        .filter(|v| carried[1].contains(v) && !answered(v))
        .cloned()
        .collect();
    for c in &mut carried {
        c.retain(|v| !both.contains(v));
    }
    if carried[0].len() + carried[1].len() > approved.len() + rejected.len() {
        let [a, r] = carried;
        let responses = m
            .entry("customApiKeyResponses")
            .or_insert_with(|| Value::Object(Default::default()));
        if !responses.is_object() {
            *responses = Value::Object(Default::default());
        }
        responses["approved"] = Value::Array(a);
        responses["rejected"] = Value::Array(r);
    }
}

/// `hasCompletedOnboarding: true` and its `lastOnboardingVersion` (a
/// short version string), when the person's file does not say.
fn carry_onboarding(m: &mut Map<String, Value>, last: &Value) {
    if m.get("hasCompletedOnboarding") != Some(&Value::Bool(true))
        && last["hasCompletedOnboarding"] == true
    {
        m.insert("hasCompletedOnboarding".into(), Value::Bool(true));
        let version = last["lastOnboardingVersion"].as_str().filter(|v| {
            (1..=32).contains(&v.len())
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        });
        if let (Some(v), None) = (version, m.get("lastOnboardingVersion")) {
            m.insert("lastOnboardingVersion".into(), Value::String(v.into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_copy_is_the_persons_file_plus_the_own_worktrees_entry() {
        let d = tempfile::tempdir().unwrap();
        let person = d.path().join("person.json");
        let copy = d.path().join("copy.json");
        let read =
            |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
        // No person's file: a new user's (empty) one.
        seed_claude_json(&person, &copy, &[Path::new("/w")]).unwrap();
        assert_eq!(read(&copy), json!({}));
        std::fs::write(&person, json!({"hasCompletedOnboarding": true}).to_string()).unwrap();
        seed_claude_json(&person, &copy, &[Path::new("/w")]).unwrap();
        assert_eq!(read(&copy), json!({"hasCompletedOnboarding": true}));
        // The agent's pane trusted its worktree; another folder's entry goes.
        std::fs::write(
            &copy,
            json!({"projects": {"/w": {"hasTrustDialogAccepted": true}, "/o": {}}}).to_string(),
        )
        .unwrap();
        seed_claude_json(&person, &copy, &[Path::new("/w")]).unwrap();
        assert_eq!(
            read(&copy),
            json!({"hasCompletedOnboarding": true, "projects": {"/w": {"hasTrustDialogAccepted": true}}})
        );
        // The person's own entry wins (an untrust stays an untrust); the
        // onboarding done once stays done.
        std::fs::write(&person, json!({"projects": {"/w": {"x": 1}}}).to_string()).unwrap();
        seed_claude_json(&person, &copy, &[Path::new("/w")]).unwrap();
        assert_eq!(
            read(&copy),
            json!({"hasCompletedOnboarding": true, "projects": {"/w": {"x": 1}}})
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::write(&person, "[1]").unwrap();
        let e = seed_claude_json(&person, &copy, &[Path::new("/w")]).unwrap_err();
        assert!(e.to_string().contains("person.json"), "{e}");
    }

    /// A person who never ran Claude Code (no `~/.claude.json`): what they
    /// answered in the agent's pane at its first start (the onboarding, the
    /// folder trust) is carried, and nothing else the agent wrote into its
    /// copy. Failed before: the copy was left whole, an MCP server or
    /// allowed tool the agent wrote there loaded at every later start.
    #[test]
    fn without_a_persons_file_only_the_pane_answers_outlive_a_restart() {
        let d = tempfile::tempdir().unwrap();
        let person = d.path().join("never-ran-claude.json");
        let copy = d.path().join("copy.json");
        std::fs::write(
            &copy,
            json!({
                "hasCompletedOnboarding": true,
                "lastOnboardingVersion": "2.1.332",
                "theme": "dark",
                "mcpServers": {"planted": {"command": "/bin/sh"}},
                "bypassPermissionsModeAccepted": true,
                "projects": {"/w": {"hasTrustDialogAccepted": true, "allowedTools": ["Bash"]},
                    "/o": {"hasTrustDialogAccepted": true}},
            })
            .to_string(),
        )
        .unwrap();
        seed_claude_json(&person, &copy, &[Path::new("/w")]).unwrap();
        let v: Value = serde_json::from_slice(&std::fs::read(&copy).unwrap()).unwrap();
        assert_eq!(
            v,
            json!({
                "hasCompletedOnboarding": true,
                "lastOnboardingVersion": "2.1.332",
                "projects": {"/w": {"hasTrustDialogAccepted": true}},
            })
        );
        assert!(!person.exists());
    }

    #[test]
    fn a_dialog_answered_in_the_pane_is_carried_into_the_next_copy() {
        let d = tempfile::tempdir().unwrap();
        let person = d.path().join("person.json");
        let copy = d.path().join("copy.json");
        let read =
            |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
        std::fs::write(&person, json!({"projects": {}}).to_string()).unwrap();
        // The person answered "Yes" to the API-key dialog in the pane, and
        // went through the onboarding there.
        std::fs::write(
            &copy,
            json!({
                "customApiKeyResponses": {"approved": ["3456789-TESTKEYxyzAA"], "rejected": []},
                "hasCompletedOnboarding": true,
                "lastOnboardingVersion": "2.1.332",
                "numStartups": 7,
            })
            .to_string(),
        )
        .unwrap();
        seed_claude_json(&person, &copy, &[Path::new("/w")]).unwrap();
        let v = read(&copy);
        assert_eq!(
            v["customApiKeyResponses"],
            json!({"approved": ["3456789-TESTKEYxyzAA"], "rejected": []})
        );
        assert_eq!(v["hasCompletedOnboarding"], true);
        assert_eq!(v["lastOnboardingVersion"], "2.1.332");
        assert!(v.get("numStartups").is_none(), "{v}");
        // Kept across every later start.
        seed_claude_json(&person, &copy, &[Path::new("/w")]).unwrap();
        assert_eq!(read(&copy), v);
        assert_eq!(
            key_suffix("sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789-TESTKEYxyzAA"),
            "3456789-TESTKEYxyzAA"
        );
        assert_eq!(key_suffix("short"), "short");
    }

    #[test]
    fn the_persons_answer_wins_and_nothing_but_the_answers_is_carried() {
        let d = tempfile::tempdir().unwrap();
        let person = d.path().join("person.json");
        let copy = d.path().join("copy.json");
        let read =
            |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
        std::fs::write(
            &person,
            json!({"customApiKeyResponses": {"approved": [], "rejected": ["their-no"]}})
                .to_string(),
        )
        .unwrap();
        // A hostile agent's copy: approves what the person rejected, plants
        // whole keys, objects, hundreds of entries, tools and MCP servers.
        let many: Vec<String> = (0..300).map(|i| format!("k{i}")).collect();
        let mut approved = vec![
            json!("their-no"),
            json!("sk-ant-api03-a-whole-key-much-longer-than-twenty"),
            json!({"x": 1}),
            json!("bad\u{1b}[31m"),
        ];
        approved.extend(many.iter().map(|k| json!(k)));
        std::fs::write(
            &copy,
            json!({
                "customApiKeyResponses": {"approved": approved, "rejected": ["both"]},
                "projects": {"/w": {
                    "hasTrustDialogAccepted": true,
                    "allowedTools": ["Bash(*)"],
                    "mcpServers": {"evil": {"command": "/bin/sh"}},
                    "hasCompletedProjectOnboarding": "yes",
                }, "/other": {"hasTrustDialogAccepted": true}},
                "mcpServers": {"evil": {"command": "/bin/sh"}},
                "primaryApiKey": "sk-planted",
                "hasCompletedOnboarding": "true",
            })
            .to_string(),
        )
        .unwrap();
        seed_claude_json(&person, &copy, &[Path::new("/w")]).unwrap();
        let v = read(&copy);
        let a = v["customApiKeyResponses"]["approved"].as_array().unwrap();
        assert!(!a.contains(&json!("their-no")), "{a:?}");
        assert_eq!(a.len(), MAX_KEY_ANSWERS, "{a:?}");
        assert!(
            a.iter().all(|k| k.as_str().unwrap().starts_with('k')),
            "{a:?}"
        );
        assert_eq!(
            v["customApiKeyResponses"]["rejected"],
            json!(["their-no", "both"])
        );
        assert_eq!(
            v["projects"],
            json!({"/w": {"hasTrustDialogAccepted": true}})
        );
        for k in ["mcpServers", "primaryApiKey", "hasCompletedOnboarding"] {
            assert!(v.get(k).is_none(), "{k}: {v}");
        }
    }

    /// Claude Code keeps a worktree's folder trust under its repository's
    /// root: the answer given in the pane is carried from the root's entry
    /// too, and from no folder outside the ones named.
    #[test]
    fn a_folder_trust_kept_under_the_projects_root_is_carried() {
        let mut doc = json!({"projects": {}});
        let last = json!({"projects": {
            "/p": {"hasTrustDialogAccepted": true, "allowedTools": ["Bash"]},
            "/elsewhere": {"hasTrustDialogAccepted": true},
        }});
        carry_answers(&mut doc, &last, &[Path::new("/p/w"), Path::new("/p")]);
        assert_eq!(
            doc["projects"],
            json!({"/p": {"hasTrustDialogAccepted": true}})
        );
    }
}
