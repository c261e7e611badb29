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
//! each start (launch/cli_state/claude_copy.rs).
//!
//! Each file is changed by an atomic replace that keeps its mode and every
//! other key (Codex's comments and layout too); a file that does not parse
//! is refused, never overwritten. What `trust` added is listed in
//! `.swarmforge/trusted.tsv`, so `untrust` removes exactly those entries and
//! never a trust the person gave by hand.

//!
//! The parts: [`store`] (each CLI's folder-trust store), [`record`]
//! (`trusted.tsv`), [`bypass`], [`api_key`] and [`codex_hook`] (the other
//! dialogs a role's CLI shows at its start).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::launch::agents::Cli;
use crate::launch::cli_state::key_suffix;
use crate::launch::plan::{Plan, PlannedRole};
use crate::launch::role_mcp;

mod api_key;
mod bypass;
mod codex_hook;
mod record;
mod store;

#[cfg(test)]
use api_key::{api_key_answer, edit_api_key};
use api_key::{trust_api_key, untrust_api_key, API_KEY_VAR};
pub use api_key::{unanswered_api_key, ApiKey};
use bypass::{trust_bypass, untrust_bypass};
pub use bypass::{unconsented, Bypass};
use codex_hook::{trust_codex_hook, untrust_codex_hook};
use record::{records, remember, save_records};
use store::{edit, is_trusted, key, read, write};

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
                .map(|v| key_suffix(&v.to_string_lossy())),
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
    role_mcp::cli_of(&r.agent)
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

/// Removes the entries `trust` added for `roles` (every role when empty),
/// and nothing else.
pub fn untrust(plan: &Plan, roles: &[String], stores: &Stores) -> Result<Vec<Change>> {
    let mut recs = records(plan);
    let mut out = Vec::new();
    for n in needs(plan, roles)? {
        let file = stores.file_for(plan, &n);
        if let Some(c) = untrust_codex_hook(plan, &n, &file, &mut recs)? {
            out.push(c);
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
    use serde_json::{json, Value};

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
