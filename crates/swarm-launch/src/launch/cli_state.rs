//! A confined agent's coding CLI and the person's CLI state
//! (docs/security.md, "Confinement"): the sandbox gives the agent a
//! private home, but the CLI's login, onboarding and the swarm's trust
//! records (`swarm trust`, launch/trust.rs) live in the person's home. So
//! the one state folder of the role's own CLI is shared into the sandbox,
//! writable, at its own path:
//!
//! * Claude Code: `~/.claude` (`$CLAUDE_CONFIG_DIR`): settings, the login
//!   (`.credentials.json`), the transcripts `swarm hook` reads;
//! * Codex: `~/.codex` (`$CODEX_HOME`): `auth.json`, `config.toml` with the
//!   trust and hook records;
//! * Gemini CLI: `~/.gemini` (`$GEMINI_CLI_HOME/.gemini`): settings,
//!   `trustedFolders.json`, the OAuth login; a trusted-folders file moved
//!   elsewhere by `$GEMINI_CLI_TRUSTED_FOLDERS_PATH` is shared read-only.
//!
//! What in that folder the person's own, unconfined sessions load as code
//! or instructions is read-only inside ([`read_only`]): the user settings
//! (a hook or MCP server written there would run in those sessions), the
//! plugins, extensions, commands, subagents, skills, rules and the user
//! memory file.
//!
//! Claude Code's other file, `~/.claude.json` (onboarding, account, trust
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
//! Nothing else of the person's home is visible: a role's sandbox never
//! gets another CLI's folder.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::fsx;
use crate::launch::agents::Cli;

/// Largest `~/.claude.json` copied (a long-used one is a few MB).
const MAX_CLAUDE_JSON: u64 = 64 * 1024 * 1024;

/// The state folder `cli` keeps, resolved from the environment (through
/// `var`) as the CLI resolves it; None without a HOME.
pub fn folder(cli: Cli, var: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = set("HOME");
    match cli {
        Cli::Claude => set("CLAUDE_CONFIG_DIR").or_else(|| Some(home?.join(".claude"))),
        Cli::Codex => set("CODEX_HOME").or_else(|| Some(home?.join(".codex"))),
        Cli::Gemini => Some(set("GEMINI_CLI_HOME").or(home)?.join(".gemini")),
    }
}

/// Gemini CLI's trusted-folders file when `GEMINI_CLI_TRUSTED_FOLDERS_PATH`
/// names one (Gemini's docs, cli/trusted-folders.md: "the desired absolute
/// file path"; it then reads and writes that file instead of
/// `~/.gemini/trustedFolders.json`). The sandbox shares it read-only:
/// `swarm trust` writes it outside, and its folder may hold anything.
pub fn gemini_trusted_folders(var: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    var("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// What a path of [`read_only`] is when the person has none: a file with
/// these bytes, or a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    File(&'static [u8]),
    Dir,
}

/// The paths in `cli`'s state `folder` from which the person's own,
/// unconfined sessions of that CLI load code or instructions, with what a
/// new one is. A confined agent gets them read-only (launch/confine/): a
/// hook, MCP server, plugin, command, rule or memory it wrote there would
/// run or speak in those sessions. None of them is written by the CLI in an
/// ordinary run (their own install commands, a trust dialog and the
/// "always allow" answers write them; `swarm trust` writes the trust
/// outside). Each CLI's docs and its pinned package name them:
///
/// * Claude Code: `settings.json`, `CLAUDE.md` (user memory), `plugins/`,
///   `commands/`, `agents/`, `skills/`, `output-styles/`, `rules/`;
/// * Codex: `config.toml` (which also holds the person's trust of each
///   hook, so a hook planted in `hooks.json` waits for their review),
///   `AGENTS.md`, `AGENTS.override.md` (an empty one is skipped), `rules/`
///   (execpolicy: an allow rule skips the approval), `prompts/`, `skills/`,
///   `plugins/`;
/// * Gemini CLI: `settings.json`, `GEMINI.md`, `trustedFolders.json` (a
///   trusted folder's own settings and hooks load unasked), `extensions/`,
///   `commands/`, `agents/`, `skills/`, `policies/` (allow rules);
/// * for each, `hooks/`, where the person's hook scripts conventionally
///   live (a hook in the settings runs what is there).
pub fn read_only(cli: Cli, folder: &Path) -> Vec<(PathBuf, Shape)> {
    use Shape::{Dir, File};
    let list: &[(&str, Shape)] = match cli {
        Cli::Claude => &[
            ("settings.json", File(b"{}\n")),
            ("CLAUDE.md", File(b"")),
            ("plugins", Dir),
            ("commands", Dir),
            ("agents", Dir),
            ("skills", Dir),
            ("output-styles", Dir),
            ("rules", Dir),
            ("hooks", Dir),
        ],
        Cli::Codex => &[
            ("config.toml", File(b"")),
            ("AGENTS.md", File(b"")),
            ("AGENTS.override.md", File(b"")),
            ("rules", Dir),
            ("prompts", Dir),
            ("skills", Dir),
            ("plugins", Dir),
            ("hooks", Dir),
        ],
        Cli::Gemini => &[
            ("settings.json", File(b"{}\n")),
            ("GEMINI.md", File(b"")),
            ("trustedFolders.json", File(b"{}\n")),
            ("extensions", Dir),
            ("commands", Dir),
            ("agents", Dir),
            ("skills", Dir),
            ("policies", Dir),
            ("hooks", Dir),
        ],
    };
    list.iter().map(|(n, k)| (folder.join(n), *k)).collect()
}

/// Makes `path` (one of [`read_only`]) as `shape` when it does not exist,
/// so the sandbox has something to mount read-only (a missing one the
/// agent could create in the writable folder). A symlink (a dotfiles
/// manager's) is left as it is: the mount takes its target, so a link to
/// nothing is refused, naming it (there would be nothing to mount).
pub fn ensure_read_only(path: &Path, shape: Shape) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        if std::fs::metadata(path).is_err() {
            return Err(Error::bad_file_hint(
                path,
                "a link to nothing, which a confined agent's sandbox cannot mount read-only",
                "make its target or remove the link",
            ));
        }
        return Ok(());
    }
    let made = match shape {
        Shape::Dir => fsx::ensure_dirs(&[path]),
        Shape::File(empty) => fsx::publish(path.parent().unwrap_or(Path::new(".")), path, empty),
    };
    match made {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

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
    for folder in folders {
        let key = folder.to_string_lossy().into_owned();
        let entry: serde_json::Map<String, Value> = last
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
    let theirs = |m: &serde_json::Map<String, Value>, list: &str| -> Vec<Value> {
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

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn folders_follow_the_clis_overrides() {
        let h = env(&[("HOME", "/h")]);
        assert_eq!(folder(Cli::Claude, &h), Some("/h/.claude".into()));
        assert_eq!(folder(Cli::Codex, &h), Some("/h/.codex".into()));
        assert_eq!(folder(Cli::Gemini, &h), Some("/h/.gemini".into()));
        assert_eq!(claude_json(&h), Some("/h/.claude.json".into()));
        let o = env(&[
            ("HOME", "/h"),
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/x"),
            ("GEMINI_CLI_HOME", "/g"),
        ]);
        assert_eq!(folder(Cli::Claude, &o), Some("/c".into()));
        assert_eq!(folder(Cli::Codex, &o), Some("/x".into()));
        assert_eq!(folder(Cli::Gemini, &o), Some("/g/.gemini".into()));
        assert_eq!(claude_json(&o), None);
        assert_eq!(folder(Cli::Codex, &env(&[])), None);
        assert_eq!(gemini_trusted_folders(&h), None);
        let t = env(&[("GEMINI_CLI_TRUSTED_FOLDERS_PATH", "/etc/g/trust.json")]);
        assert_eq!(gemini_trusted_folders(&t), Some("/etc/g/trust.json".into()));
    }

    #[test]
    fn a_missing_loaded_path_is_made_and_an_existing_one_kept() {
        let d = tempfile::tempdir().unwrap();
        let paths = read_only(Cli::Claude, d.path());
        assert!(paths.contains(&(d.path().join("plugins"), Shape::Dir)));
        for (p, shape) in &paths {
            ensure_read_only(p, *shape).unwrap();
        }
        assert_eq!(
            std::fs::read(d.path().join("settings.json")).unwrap(),
            b"{}\n"
        );
        assert_eq!(std::fs::read(d.path().join("CLAUDE.md")).unwrap(), b"");
        assert!(d.path().join("commands").is_dir());
        // The person's own are left as they are, a link too.
        std::fs::write(d.path().join("CLAUDE.md"), "theirs").unwrap();
        std::os::unix::fs::symlink(d.path().join("commands"), d.path().join("rules2")).unwrap();
        ensure_read_only(&d.path().join("CLAUDE.md"), Shape::File(b"")).unwrap();
        ensure_read_only(&d.path().join("rules2"), Shape::Dir).unwrap();
        std::os::unix::fs::symlink("/nowhere", d.path().join("rules3")).unwrap();
        let e = ensure_read_only(&d.path().join("rules3"), Shape::Dir).unwrap_err();
        assert!(e.to_string().contains("rules3"), "{e}");
        assert!(d.path().join("rules3").symlink_metadata().is_ok());
        assert_eq!(
            std::fs::read(d.path().join("CLAUDE.md")).unwrap(),
            b"theirs"
        );
        assert!(d
            .path()
            .join("rules2")
            .symlink_metadata()
            .unwrap()
            .is_symlink());
        let e = ensure_read_only(&d.path().join("no/such/x"), Shape::File(b"")).unwrap_err();
        assert!(e.to_string().contains("no/such/x"), "{e}");
    }

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
