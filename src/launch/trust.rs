//! `swarm trust` / `swarm untrust` (docs/agents.md, "Trusting the
//! worktrees"): each coding CLI asks, the first time it starts in a folder,
//! whether to trust it, and waits in its pane until a person answers. With
//! the person's consent, given by running `swarm trust`, the swarm records
//! that answer for its own worktrees, and only those, in each CLI's own
//! store:
//!
//! * Claude Code: `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`),
//!   `projects["<worktree>"].hasTrustDialogAccepted = true`;
//! * Codex: `~/.codex/config.toml` (`$CODEX_HOME/config.toml`),
//!   `[projects."<worktree>"] trust_level = "trusted"`;
//! * Gemini CLI: `~/.gemini/trustedFolders.json`
//!   (`$GEMINI_CLI_TRUSTED_FOLDERS_PATH`, `$GEMINI_CLI_HOME/.gemini/…`),
//!   `"<worktree>": "TRUST_FOLDER"`.
//!
//! A Claude Code role with `permission: full` (bypassPermissions) also
//! shows, at its first start, a disclaimer ("Claude Code running in Bypass
//! Permissions mode", `❯ No, exit` highlighted). `trust` records the
//! person's acceptance for that role's worktree only, as Claude Code's own
//! local setting `skipDangerousModePermissionPrompt: true` in
//! `<worktree>/.claude/settings.local.json` (never in the user's settings,
//! which would cover every project).
//!
//! Claude Code started with a key in `ANTHROPIC_API_KEY` asks, until the
//! person answers, "Detected a custom API key … Do you want to use this API
//! key?" (`No (recommended)` highlighted). `trust` records the person's
//! "Yes" where Claude Code itself does, in `~/.claude.json`
//! (`$CLAUDE_CONFIG_DIR/.claude.json`): the key's last 20 characters in
//! `customApiKeyResponses.approved`, never the key. A "No" the person gave
//! is left alone. A confined agent's copy of the file is seeded from it at
//! each start (launch/cli_state.rs).
//!
//! Each file is changed by an atomic replace that keeps its mode and every
//! other key (Codex's comments and layout too); a file that does not parse
//! is refused, never overwritten. What `trust` added is listed in
//! `.swarmforge/trusted.tsv`, so `untrust` removes exactly those entries and
//! never a trust the person gave by hand.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::launch::agents::Cli;
use crate::launch::plan::{Plan, PlannedRole};

/// Largest store read (a long-used `~/.claude.json` is a few MB).
const MAX_STORE: u64 = 64 * 1024 * 1024;
/// Largest `.swarmforge/trusted.tsv` read (a line per trusted worktree).
const MAX_RECORD: u64 = 1024 * 1024;

/// Where each CLI keeps its trust, resolved from the environment as the
/// CLIs resolve it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stores {
    pub claude: PathBuf,
    /// Claude Code's user settings (`~/.claude/settings.json`,
    /// `$CLAUDE_CONFIG_DIR/settings.json`), where a person's own acceptance
    /// of the bypass disclaimer lands; read, never written.
    pub claude_settings: PathBuf,
    pub codex: PathBuf,
    pub gemini: PathBuf,
    /// What Claude Code stores of `ANTHROPIC_API_KEY` when a person answers
    /// its "Detected a custom API key" dialog: the key's last 20
    /// characters (cli_state::key_suffix); None without a key. The key
    /// itself is never kept.
    pub claude_api_key: Option<String>,
}

impl Stores {
    /// From `HOME` and the CLIs' own overrides, read through `var`.
    pub fn from(var: impl Fn(&str) -> Option<OsString>) -> Result<Stores> {
        let set = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = set("HOME")
            .ok_or_else(|| Error::env("HOME is not set: the CLIs keep their trust under it"))?;
        Ok(Stores {
            claude: set("CLAUDE_CONFIG_DIR")
                .unwrap_or_else(|| home.clone())
                .join(".claude.json"),
            claude_settings: set("CLAUDE_CONFIG_DIR")
                .unwrap_or_else(|| home.join(".claude"))
                .join("settings.json"),
            codex: set("CODEX_HOME")
                .unwrap_or_else(|| home.join(".codex"))
                .join("config.toml"),
            gemini: set("GEMINI_CLI_TRUSTED_FOLDERS_PATH").unwrap_or_else(|| {
                set("GEMINI_CLI_HOME")
                    .unwrap_or_else(|| home.clone())
                    .join(".gemini")
                    .join("trustedFolders.json")
            }),
            claude_api_key: var(API_KEY_VAR)
                .filter(|v| !v.is_empty())
                .map(|v| crate::launch::cli_state::key_suffix(&v.to_string_lossy())),
        })
    }

    pub fn from_env() -> Result<Stores> {
        Stores::from(|k| std::env::var_os(k))
    }

    fn file(&self, cli: Cli) -> &Path {
        match cli {
            Cli::Claude => &self.claude,
            Cli::Codex => &self.codex,
            Cli::Gemini => &self.gemini,
        }
    }

    /// The store of `n`'s CLI as its role runs it: a Codex role with
    /// `mcp: true` runs with `CODEX_HOME=<worktree>/.codex` (agents/codex.rs)
    /// and reads its trust from there.
    fn file_for(&self, plan: &Plan, n: &Need) -> PathBuf {
        let role = plan.roles.iter().find(|r| r.name == n.role);
        let home = role.and_then(|r| {
            n.cli
                .preset()
                .mcp_env(&r.worktree_path)
                .into_iter()
                .find(|(k, _)| *k == "CODEX_HOME")
                .filter(|_| plan.config.role(&r.name).is_some_and(|c| c.mcp))
                .map(|(_, v)| v)
        });
        match home {
            Some(h) => h.join("config.toml"),
            None => self.file(n.cli).to_path_buf(),
        }
    }
}

/// The CLI a role runs that has a folder-trust dialog (a preset, a
/// SwarmForge model agent, or a command line starting it).
pub fn cli_of(r: &PlannedRole) -> Option<Cli> {
    crate::launch::role_mcp::cli_of(&r.agent)
}

/// One worktree a CLI must trust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    pub role: String,
    pub cli: Cli,
    /// As the CLI sees its working folder (symlinks resolved).
    pub folder: PathBuf,
}

/// What one change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    Added,
    /// Trusted already (by hand or by an earlier `swarm trust`): left alone.
    Already,
    /// The person answered No in the CLI itself (the API key): left alone.
    Declined,
    Removed,
    /// `untrust`: the entry was gone or changed by someone else: left alone.
    Absent,
    /// Could not be done; the reason is in the change's key line.
    Failed,
}

/// One file and key, and what happened to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub role: String,
    pub cli: Cli,
    pub file: PathBuf,
    /// The key, in the file's own syntax.
    pub key: String,
    pub done: Done,
}

impl Change {
    fn of(n: Need, file: PathBuf, done: Done) -> Change {
        Change {
            key: key(n.cli, &n.folder),
            role: n.role,
            cli: n.cli,
            file,
            done,
        }
    }

    pub fn line(&self) -> String {
        let what = match self.done {
            Done::Added => "added",
            Done::Already => "already trusted, left alone",
            Done::Declined => "answered No in the CLI, left alone",
            Done::Removed => "removed",
            Done::Absent => "not ours or gone, left alone",
            Done::Failed => "NOT done",
        };
        format!(
            "{} ({}): {} {}: {what}",
            self.role,
            self.cli.name(),
            self.file.display(),
            self.key
        )
    }
}

/// The worktrees of `roles` (all agent roles when empty) and their CLIs.
/// Naming a role that does not exist, or runs no such CLI, is an error.
pub fn needs(plan: &Plan, roles: &[String]) -> Result<Vec<Need>> {
    for name in roles {
        let Some(r) = plan.roles.iter().find(|r| &r.name == name) else {
            let names: Vec<&str> = plan.roles.iter().map(|r| r.name.as_str()).collect();
            return Err(Error::not_found(format!(
                "no role {name:?} in this swarm; roles: {}",
                names.join(", ")
            )));
        };
        if cli_of(r).is_none() {
            return Err(Error::bad_input(format!(
                "role {name} runs no CLI that asks for folder trust (Claude Code, Codex, Gemini CLI)"
            )));
        }
    }
    let mut out: Vec<Need> = Vec::new();
    for r in &plan.roles {
        if !roles.is_empty() && !roles.contains(&r.name) {
            continue;
        }
        let Some(cli) = cli_of(r) else { continue };
        let folder = r
            .worktree_path
            .canonicalize()
            .at(&r.worktree_path)
            .map_err(|e| {
                Error::not_found(format!(
                    "{e}\n  hint: `swarm init` creates the worktree of role {}",
                    r.name
                ))
            })?;
        if !out.iter().any(|n| n.cli == cli && n.folder == folder) {
            out.push(Need {
                role: r.name.clone(),
                cli,
                folder,
            });
        }
    }
    Ok(out)
}

fn key(cli: Cli, folder: &Path) -> String {
    let f = folder.to_string_lossy();
    match cli {
        Cli::Claude => format!("projects[{}].hasTrustDialogAccepted", json!(f)),
        Cli::Codex => format!("[projects.{}] trust_level", json!(f)),
        Cli::Gemini => json!(f).to_string(),
    }
}

/// A store's text: None when the file does not exist.
fn read(file: &Path) -> Result<Option<String>> {
    match std::fs::symlink_metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(file, e)),
        Ok(_) => {}
    }
    let b = fsx::read_bounded(file, MAX_STORE)
        .map_err(|e| Error::bad_file(file, format!("cannot read it: {e}")))?;
    String::from_utf8(b)
        .map(Some)
        .map_err(|_| Error::bad_file(file, "not UTF-8 text; not changed"))
}

fn bad(file: &Path, cause: impl std::fmt::Display) -> Error {
    Error::bad_file_hint(
        file,
        format!("does not parse ({cause}); nothing in it was changed"),
        "repair or move the file, then run the command again",
    )
}

/// Replaces `file` atomically, keeping its mode (a new one is private),
/// through a symlink to its target.
fn write(file: &Path, text: &str) -> Result<()> {
    let real = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    let dir = real.parent().unwrap_or(Path::new("/")).to_path_buf();
    if real.exists() {
        fsx::replace(&dir, &real, text.as_bytes()).at(&real)
    } else {
        fsx::ensure_dirs(&[&dir]).at(&dir)?;
        fsx::write_private(&dir, &real, text.as_bytes()).at(&real)
    }
}

/// The trust as the store holds it now.
fn is_trusted(cli: Cli, text: Option<&str>, file: &Path, folder: &Path) -> Result<bool> {
    let Some(text) = text else { return Ok(false) };
    let f = folder.to_string_lossy();
    Ok(match cli {
        Cli::Claude | Cli::Gemini => {
            let v: Value = serde_json::from_str(text).map_err(|e| bad(file, e))?;
            match cli {
                Cli::Claude => v["projects"][f.as_ref()]["hasTrustDialogAccepted"] == true,
                _ => v[f.as_ref()] == "TRUST_FOLDER",
            }
        }
        Cli::Codex => {
            let d: toml_edit::DocumentMut = text.parse().map_err(|e| bad(file, e))?;
            d.get("projects")
                .and_then(|p| p.get(f.as_ref()))
                .and_then(|t| t.get("trust_level"))
                .and_then(|v| v.as_str())
                == Some("trusted")
        }
    })
}

/// The store's text with the trust set (`on`) or removed.
fn edit(cli: Cli, text: Option<&str>, file: &Path, folder: &Path, on: bool) -> Result<String> {
    let f = folder.to_string_lossy().into_owned();
    match cli {
        Cli::Claude | Cli::Gemini => {
            let mut v: Value = match text {
                Some(t) => serde_json::from_str(t).map_err(|e| bad(file, e))?,
                None => json!({}),
            };
            if !v.is_object() {
                return Err(bad(file, "not a JSON object"));
            }
            if cli == Cli::Gemini {
                let m = v.as_object_mut().expect("an object");
                if on {
                    m.insert(f, json!("TRUST_FOLDER"));
                } else {
                    m.remove(&f);
                }
            } else {
                let projects = v
                    .as_object_mut()
                    .expect("an object")
                    .entry("projects")
                    .or_insert_with(|| json!({}));
                let Some(projects) = projects.as_object_mut() else {
                    return Err(bad(file, "`projects` is not an object"));
                };
                let entry = projects.entry(f.clone()).or_insert_with(|| json!({}));
                let Some(entry) = entry.as_object_mut() else {
                    return Err(bad(file, "a `projects` entry is not an object"));
                };
                if on {
                    entry.insert("hasTrustDialogAccepted".into(), json!(true));
                } else {
                    entry.remove("hasTrustDialogAccepted");
                    // An entry holding nothing else was ours alone.
                    if entry.is_empty() {
                        projects.remove(&f);
                    }
                }
            }
            let mut out = serde_json::to_string_pretty(&v).map_err(|e| bad(file, e))?;
            out.push('\n');
            Ok(out)
        }
        Cli::Codex => {
            let mut d: toml_edit::DocumentMut =
                text.unwrap_or("").parse().map_err(|e| bad(file, e))?;
            if !d.contains_key("projects") {
                let mut t = toml_edit::Table::new();
                t.set_implicit(true);
                d.insert("projects", toml_edit::Item::Table(t));
            }
            let Some(projects) = d["projects"].as_table_like_mut() else {
                return Err(bad(file, "`projects` is not a table"));
            };
            if on {
                if projects.get(&f).is_none() {
                    projects.insert(&f, toml_edit::Item::Table(toml_edit::Table::new()));
                }
                let Some(t) = projects.get_mut(&f).and_then(|t| t.as_table_like_mut()) else {
                    return Err(bad(file, "a `projects` entry is not a table"));
                };
                t.insert("trust_level", toml_edit::value("trusted"));
            } else {
                let now_empty = match projects.get_mut(&f).and_then(|t| t.as_table_like_mut()) {
                    Some(t) => {
                        t.remove("trust_level");
                        t.is_empty()
                    }
                    None => false,
                };
                if now_empty {
                    projects.remove(&f);
                }
                if projects.is_empty() {
                    d.remove("projects");
                }
            }
            Ok(d.to_string())
        }
    }
}

/// `.swarmforge/trusted.tsv`: `cli<TAB>file<TAB>folder`, one entry `trust`
/// added a line.
fn record_file(plan: &Plan) -> PathBuf {
    plan.project.swarmforge().join("trusted.tsv")
}

fn records(plan: &Plan) -> Vec<(String, PathBuf, PathBuf)> {
    let text = fsx::read_bounded(&record_file(plan), MAX_RECORD)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some((
                f.next()?.to_string(),
                PathBuf::from(f.next()?),
                PathBuf::from(f.next()?),
            ))
        })
        .collect()
}

fn save_records(plan: &Plan, recs: &[(String, PathBuf, PathBuf)]) -> Result<()> {
    let file = record_file(plan);
    let text: String = recs
        .iter()
        .map(|(c, f, d)| format!("{c}\t{}\t{}\n", f.display(), d.display()))
        .collect();
    let dir = plan.project.swarmforge();
    if file.exists() {
        fsx::replace(&dir, &file, text.as_bytes()).at(&file)
    } else {
        fsx::write_private(&dir, &file, text.as_bytes()).at(&file)
    }
}

/// Adds `rec` to `.swarmforge/trusted.tsv` (once).
fn remember(
    plan: &Plan,
    recs: &mut Vec<(String, PathBuf, PathBuf)>,
    rec: (String, PathBuf, PathBuf),
) -> Result<()> {
    if recs.contains(&rec) {
        return Ok(());
    }
    recs.push(rec);
    save_records(plan, recs)
}

/// Records trust for the worktrees of `roles` (every agent role when
/// empty) in each CLI's store. Returns every file and key looked at.
pub fn trust(plan: &Plan, roles: &[String], stores: &Stores) -> Result<Vec<Change>> {
    let mut recs = records(plan);
    let mut out = Vec::new();
    for n in needs(plan, roles)? {
        let file = stores.file_for(plan, &n);
        let text = read(&file)?;
        let done = if is_trusted(n.cli, text.as_deref(), &file, &n.folder)? {
            Done::Already
        } else {
            write(
                &file,
                &edit(n.cli, text.as_deref(), &file, &n.folder, true)?,
            )?;
            remember(
                plan,
                &mut recs,
                (n.cli.name().to_string(), file.clone(), n.folder.clone()),
            )?;
            Done::Added
        };
        let hook = if n.cli == Cli::Codex {
            trust_codex_hook(plan, &n, &file, &mut recs)?
        } else {
            Vec::new()
        };
        out.push(Change::of(n, file, done));
        out.extend(hook);
    }
    out.extend(trust_bypass(plan, roles, stores, &mut recs)?);
    out.extend(trust_api_key(plan, roles, stores, &mut recs)?);
    Ok(out)
}

/// The record of a Claude Code bypass-permissions consent `trust` added.
const CLAUDE_BYPASS: &str = "claude-bypass";
/// Claude Code's setting for "the person accepted the bypass disclaimer".
const BYPASS_KEY: &str = "skipDangerousModePermissionPrompt";

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
fn bypass_roles(plan: &Plan, roles: &[String]) -> Vec<Bypass> {
    plan.roles
        .iter()
        .filter(|r| roles.is_empty() || roles.contains(&r.name))
        .filter(|r| crate::launch::agents::claude_root::bypasses(r))
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
fn holds_consent(file: &Path) -> Result<bool> {
    Ok(match read(file)? {
        Some(t) => {
            let v: Value = serde_json::from_str(&t).map_err(|e| bad(file, e))?;
            v[BYPASS_KEY] == true
        }
        None => false,
    })
}

fn consented(b: &Bypass) -> Result<bool> {
    holds_consent(&b.file)
}

/// The person accepted the disclaimer in Claude Code itself, which records
/// it in the user settings (for every project): no worktree needs ours.
fn accepted_by_user(stores: &Stores) -> bool {
    holds_consent(&stores.claude_settings).unwrap_or(false)
}

/// `b`'s local settings with the consent set (`on`) or removed.
fn set_consent(b: &Bypass, on: bool) -> Result<()> {
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

fn bypass_change(b: &Bypass, done: Done) -> Change {
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
fn trust_bypass(
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
fn untrust_bypass(
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

/// The record of an API-key consent `trust` added:
/// `claude-api-key<TAB><file><TAB>ANTHROPIC_API_KEY` (the key's suffix is
/// not written here: `untrust` removes the suffix of the key it is run
/// with).
const CLAUDE_API_KEY: &str = "claude-api-key";
/// Where Claude Code finds the key whose use it asks about.
const API_KEY_VAR: &str = "ANTHROPIC_API_KEY";

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
fn api_key_roles(plan: &Plan, roles: &[String]) -> Vec<String> {
    use crate::launch::plan::AgentSpec;
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
fn api_key_answer(text: Option<&str>, file: &Path, suffix: &str) -> Result<Option<bool>> {
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
fn edit_api_key(text: Option<&str>, file: &Path, suffix: &str, on: bool) -> Result<String> {
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

fn api_key_change(roles: &[String], file: &Path, done: Done) -> Change {
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
fn trust_api_key(
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
fn untrust_api_key(
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

/// The record of a Codex hook trust `trust` added (its own kind, beside
/// the folder trust's `codex`).
const CODEX_HOOK: &str = "codex-hook";

/// The key prefix of every hook of `folder`'s `.codex/hooks.json`.
fn hook_prefix(folder: &Path) -> String {
    format!("{}:", folder.join(".codex").join("hooks.json").display())
}

/// Trusts the turn-end hook `swarm up` gives a Codex role, with the hash
/// Codex itself reports (launch::agents::codex_hooks): on the command line
/// for most roles, in the role's own CODEX_HOME for `mcp: true` (whose hook
/// file is written first, exactly as `swarm up` writes it).
fn trust_codex_hook(
    plan: &Plan,
    n: &Need,
    file: &Path,
    recs: &mut Vec<(String, PathBuf, PathBuf)>,
) -> Result<Vec<Change>> {
    use crate::launch::agents::{codex_hooks, hook_command, setup};
    let Some(r) = plan.roles.iter().find(|r| r.name == n.role) else {
        return Ok(Vec::new());
    };
    let bin = crate::launch::shims::own_bin_dir()?;
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

/// Removes the entries `trust` added for `roles` (every role when empty),
/// and nothing else.
pub fn untrust(plan: &Plan, roles: &[String], stores: &Stores) -> Result<Vec<Change>> {
    let mut recs = records(plan);
    let mut out = Vec::new();
    for n in needs(plan, roles)? {
        let file = stores.file_for(plan, &n);
        let hook_rec = (CODEX_HOOK.to_string(), file.clone(), n.folder.clone());
        if n.cli == Cli::Codex && recs.contains(&hook_rec) {
            recs.retain(|r| r != &hook_rec);
            // A command-line hook's trust is one key per store, shared by
            // every such role: removed with the last of them.
            let shared = recs.iter().any(|(c, f, _)| c == CODEX_HOOK && f == &file);
            let mcp = plan.config.role(&n.role).is_some_and(|c| c.mcp);
            let prefix = if mcp {
                hook_prefix(&n.folder)
            } else {
                crate::launch::agents::codex_hooks::SESSION_FLAGS.to_string()
            };
            let removed = if !mcp && shared {
                0
            } else {
                let text = read(&file)?.unwrap_or_default();
                let (new, removed) =
                    crate::launch::agents::codex_hooks::without_trust(&text, &prefix)
                        .map_err(|e| bad(&file, e))?;
                if removed > 0 {
                    write(&file, &new)?;
                }
                removed
            };
            save_records(plan, &recs)?;
            out.push(Change {
                role: n.role.clone(),
                cli: n.cli,
                file: file.clone(),
                key: format!("[hooks.state.\"{prefix}…\"]"),
                done: if removed > 0 {
                    Done::Removed
                } else {
                    Done::Absent
                },
            });
        }
        let rec = (n.cli.name().to_string(), file.clone(), n.folder.clone());
        if !recs.contains(&rec) {
            continue;
        }
        let text = read(&file)?;
        let done = if is_trusted(n.cli, text.as_deref(), &file, &n.folder)? {
            write(
                &file,
                &edit(n.cli, text.as_deref(), &file, &n.folder, false)?,
            )?;
            Done::Removed
        } else {
            Done::Absent
        };
        recs.retain(|r| r != &rec);
        save_records(plan, &recs)?;
        out.push(Change::of(n, file, done));
    }
    out.extend(untrust_bypass(plan, roles, &mut recs)?);
    out.extend(untrust_api_key(plan, roles, stores, &mut recs)?);
    Ok(out)
}

/// The swarm's worktrees that a CLI does not trust yet (it would show its
/// trust dialog there), for `swarm doctor`; a store that cannot be read
/// counts as not trusting.
pub fn untrusted(plan: &Plan, stores: &Stores) -> Result<Vec<Need>> {
    let mut out = Vec::new();
    for n in needs(plan, &[])? {
        let file = stores.file_for(plan, &n);
        let ok = read(&file)
            .ok()
            .flatten()
            .is_some_and(|t| is_trusted(n.cli, Some(&t), &file, &n.folder).unwrap_or(false));
        if !ok {
            out.push(n);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_keeps_comments_and_other_tables() {
        let f = Path::new("/h/.codex/config.toml");
        let dir = Path::new("/p/.worktrees/coder");
        let before = "# mine\nmodel = \"o3\" # why\n\n[tui]\nx = 1\n";
        let on = edit(Cli::Codex, Some(before), f, dir, true).unwrap();
        assert!(on.starts_with(before), "{on}");
        assert!(
            on.contains("[projects.\"/p/.worktrees/coder\"]\ntrust_level = \"trusted\"\n"),
            "{on}"
        );
        assert!(is_trusted(Cli::Codex, Some(&on), f, dir).unwrap());
        let off = edit(Cli::Codex, Some(&on), f, dir, false).unwrap();
        assert_eq!(off, before);
        assert!(edit(Cli::Codex, Some("[broken"), f, dir, true).is_err());
    }

    #[test]
    fn claude_and_gemini_keep_every_other_key() {
        let f = Path::new("/h/.claude.json");
        let dir = Path::new("/p/w");
        let before = r#"{"theme":"dark","projects":{"/p/w":{"allowedTools":["x"]},"/o":{"hasTrustDialogAccepted":true}}}"#;
        let on = edit(Cli::Claude, Some(before), f, dir, true).unwrap();
        let v: Value = serde_json::from_str(&on).unwrap();
        assert_eq!(v["theme"], "dark");
        assert_eq!(v["projects"]["/p/w"]["allowedTools"][0], "x");
        assert_eq!(v["projects"]["/p/w"]["hasTrustDialogAccepted"], true);
        assert_eq!(v["projects"]["/o"]["hasTrustDialogAccepted"], true);
        let off: Value =
            serde_json::from_str(&edit(Cli::Claude, Some(&on), f, dir, false).unwrap()).unwrap();
        assert_eq!(off, serde_json::from_str::<Value>(before).unwrap());

        let g = Path::new("/h/.gemini/trustedFolders.json");
        let on = edit(Cli::Gemini, Some(r#"{"/x":"DO_NOT_TRUST"}"#), g, dir, true).unwrap();
        let v: Value = serde_json::from_str(&on).unwrap();
        assert_eq!(
            (v["/x"].as_str(), v["/p/w"].as_str()),
            (Some("DO_NOT_TRUST"), Some("TRUST_FOLDER"))
        );
        assert!(edit(Cli::Gemini, Some("[]"), g, dir, true).is_err());
    }

    #[test]
    fn stores_follow_each_clis_overrides() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let s = Stores::from(env(&[("HOME", "/h")])).unwrap();
        assert_eq!(s.claude, Path::new("/h/.claude.json"));
        assert_eq!(s.claude_settings, Path::new("/h/.claude/settings.json"));
        assert_eq!(s.codex, Path::new("/h/.codex/config.toml"));
        assert_eq!(s.gemini, Path::new("/h/.gemini/trustedFolders.json"));
        let s = Stores::from(env(&[
            ("HOME", "/h"),
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/x"),
            ("GEMINI_CLI_HOME", "/g"),
        ]))
        .unwrap();
        assert_eq!(s.claude, Path::new("/c/.claude.json"));
        assert_eq!(s.claude_settings, Path::new("/c/settings.json"));
        assert_eq!(s.codex, Path::new("/x/config.toml"));
        assert_eq!(s.gemini, Path::new("/g/.gemini/trustedFolders.json"));
        let s = Stores::from(env(&[
            ("HOME", "/h"),
            ("GEMINI_CLI_HOME", "/g"),
            ("GEMINI_CLI_TRUSTED_FOLDERS_PATH", "/t/trust.json"),
        ]))
        .unwrap();
        assert_eq!(s.gemini, Path::new("/t/trust.json"));
        assert!(Stores::from(env(&[])).is_err());
    }

    #[test]
    fn the_api_key_consent_keeps_every_other_key_and_refuses_a_strange_shape() {
        let f = Path::new("/h/.claude.json");
        let before =
            r#"{"theme":"dark","customApiKeyResponses":{"approved":["old"],"rejected":["no"]}}"#;
        let on = edit_api_key(Some(before), f, "3456789-TESTKEYxyzAA", true).unwrap();
        let v: Value = serde_json::from_str(&on).unwrap();
        assert_eq!(v["theme"], "dark");
        assert_eq!(
            v["customApiKeyResponses"],
            json!({"approved": ["old", "3456789-TESTKEYxyzAA"], "rejected": ["no"]})
        );
        assert_eq!(
            api_key_answer(Some(&on), f, "3456789-TESTKEYxyzAA").unwrap(),
            Some(true)
        );
        assert_eq!(api_key_answer(Some(&on), f, "no").unwrap(), Some(false));
        assert_eq!(api_key_answer(None, f, "no").unwrap(), None);
        let off = edit_api_key(Some(&on), f, "3456789-TESTKEYxyzAA", false).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&off).unwrap(),
            serde_json::from_str::<Value>(before).unwrap()
        );
        for bad in [
            r#"[]"#,
            r#"{"customApiKeyResponses":[]}"#,
            r#"{"customApiKeyResponses":{"approved":"x"}}"#,
        ] {
            let e = edit_api_key(Some(bad), f, "k", true).unwrap_err();
            assert!(e.to_string().contains("/h/.claude.json"), "{e}");
        }
    }
}
