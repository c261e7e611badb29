//! What serde cannot check in `swarm.yaml`'s roles: names (docs/protocol.md
//! §4) and their uniqueness, agents and the keys each takes, values, and
//! worktrees; each error with the line and column of the key at fault.
//!
//! Why a module: `swarm up`, `swarm role add` and `swarm demo` check roles
//! the same way, before anything is made of them. Invariant: the first
//! fault found is the one reported, at its key's position when the text is
//! at hand (`swarm role add` has none: the file alone is named).

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use super::{shared_human, PlannedRole, API_AGENT};
use crate::error::{Error, Result};
use crate::launch::agents::Cli;
use crate::protocol::config::RoleConfig;
use crate::protocol::grammar::{self, is_shared_worktree, valid_worktree_name};
use crate::protocol::layout::Project;
use crate::text::escape;

/// Where each role's keys sit in `swarm.yaml`, for error positions.
#[derive(Deserialize, Default)]
#[serde(default)]
struct SpanDoc {
    roles: Vec<SpanRole>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct SpanRole {
    name: Option<serde_saphyr::Spanned<String>>,
    agent: Option<serde_saphyr::Spanned<String>>,
    pub(super) worktree: Option<serde_saphyr::Spanned<String>>,
}

pub(super) fn spans(text: &str) -> Vec<SpanRole> {
    serde_saphyr::from_str::<SpanDoc>(text)
        .map(|d| d.roles)
        .unwrap_or_default()
}

type Loc = Option<(u64, u64)>;

pub(super) fn loc(s: &Option<serde_saphyr::Spanned<String>>) -> Loc {
    s.as_ref()
        .map(|s| (s.referenced.line(), s.referenced.column()))
        .filter(|(l, _)| *l > 0)
}

fn yaml_error(path: &Path, at: Loc, msg: String, hint: &str) -> Error {
    let pos = match at {
        Some((l, c)) => format!("{}:{l}:{c}", path.display()),
        None => path.display().to_string(),
    };
    Error::env(format!("{pos}: {msg}\n  hint: {hint}"))
}

/// What is missing or wrong in an `agent: api` role's keys.
pub fn api_problem(r: &RoleConfig) -> Option<String> {
    let Some(url) = r.base_url.as_deref() else {
        return Some("needs `base_url`".into());
    };
    if !(url.starts_with("http://") || url.starts_with("https://"))
        || url.contains(char::is_whitespace)
    {
        return Some(format!(
            "has base_url '{}', which is not an http:// or https:// URL",
            escape(url)
        ));
    }
    if r.model.as_deref().is_none_or(|m| m.trim().is_empty()) {
        return Some("needs `model`".into());
    }
    if let Some(v) = r.api_key_env.as_deref() {
        let ok = v.bytes().enumerate().all(|(i, c)| {
            c == b'_'
                || c.is_ascii_uppercase()
                || c.is_ascii_lowercase()
                || (i > 0 && c.is_ascii_digit())
        });
        if v.is_empty() || !ok {
            return Some(format!(
                "has api_key_env '{}', which is not an environment variable name (the key itself never goes in swarm.yaml)",
                escape(v)
            ));
        }
    }
    if r.request_timeout.0.is_zero() {
        return Some("has request_timeout 0".into());
    }
    None
}

/// Checks what serde cannot: names (docs/protocol.md §4), uniqueness, agents,
/// worktrees.
pub fn validate_yaml_roles(roles: &[RoleConfig], text: &str, path: &Path) -> Result<()> {
    let c = Check {
        sp: spans(text),
        path,
    };
    // Name → first position, so checking a long table stays linear.
    let mut first_at: HashMap<&str, usize> = HashMap::new();
    for (i, r) in roles.iter().enumerate() {
        c.name(i, r, &first_at)?;
        first_at.insert(r.name.as_str(), i);
        c.agent(i, r)?;
        c.keys(i, r)?;
        c.values(i, r)?;
        c.permissions(i, r)?;
        c.worktree(i, r, roles)?;
    }
    Ok(())
}

/// One check of `swarm.yaml`'s roles: where each key sits, for the errors.
struct Check<'a> {
    sp: Vec<SpanRole>,
    path: &'a Path,
}

impl Check<'_> {
    fn at(&self, i: usize, f: fn(&SpanRole) -> Loc) -> Loc {
        self.sp.get(i).and_then(f)
    }

    fn error(&self, at: Loc, msg: String, hint: &str) -> Result<()> {
        Err(yaml_error(self.path, at, msg, hint))
    }

    /// Role `i` has a valid name, not reserved, not used before.
    fn name(&self, i: usize, r: &RoleConfig, first_at: &HashMap<&str, usize>) -> Result<()> {
        let name_at = self.at(i, |s| loc(&s.name));
        if r.name.is_empty() {
            return self.error(
                self.at(i, |s| loc(&s.agent)),
                format!("role #{} has no name", i + 1),
                "give every entry of `roles:` a `name:`",
            );
        }
        if !grammar::valid_role(&r.name) {
            return self.error(
                name_at,
                format!(
                    "invalid role name '{}'",
                    escape(&r.name)
                ),
                "role names start with a letter or digit and contain only letters, digits and '-' (at most 64 characters)",
            );
        }
        if let Some(why) = grammar::reserved_role(&r.name) {
            return self.error(
                name_at,
                format!("role name '{}' is reserved ({why})", r.name),
                "pick another name; `all` and `handoffd` mean something in every message",
            );
        }
        if let Some(&j) = first_at.get(r.name.as_str()) {
            let first = self
                .at(j, |s| loc(&s.name))
                .map(|(l, _)| format!(" (first defined on line {l})"))
                .unwrap_or_default();
            return self.error(
                name_at,
                format!("duplicate role '{}'{first}", r.name),
                "role names must be unique",
            );
        }
        Ok(())
    }

    /// Role `i` names an agent, on one line.
    fn agent(&self, i: usize, r: &RoleConfig) -> Result<()> {
        let agent = r.agent.trim();
        if agent.is_empty() {
            return self.error(
                self.at(i, |s| loc(&s.name)),
                format!("role '{}' has no agent", r.name),
                "set `agent:` to a command line (run with sh -c in the role's worktree) or to `human`",
            );
        }
        if agent.chars().any(|c| c.is_control()) {
            return self.error(
                self.at(i, |s| loc(&s.agent)),
                format!(
                    "the agent of role '{}' contains a control character",
                    r.name
                ),
                "write the command on one line",
            );
        }
        Ok(())
    }

    /// Role `i` sets only the keys its agent takes: `base_url` and
    /// `api_key_env` only `agent: api` (and all it needs), `model` and
    /// `args` only a preset (`model` an api agent too).
    fn keys(&self, i: usize, r: &RoleConfig) -> Result<()> {
        let agent = r.agent.trim();
        let agent_at = self
            .at(i, |s| loc(&s.agent))
            .or(self.at(i, |s| loc(&s.name)));
        let is_api = agent == API_AGENT;
        let api_only = [
            ("base_url", r.base_url.is_some()),
            ("api_key_env", r.api_key_env.is_some()),
        ];
        if !is_api {
            if let Some((key, _)) = api_only.iter().find(|(_, set)| *set) {
                return self.error(
                    agent_at,
                    format!(
                        "role '{}' sets `{key}`, which only `agent: api` takes",
                        r.name
                    ),
                    "use `agent: api` with `base_url`, `model` and `api_key_env`, or remove the key",
                );
            }
        } else if let Some(why) = api_problem(r) {
            return self.error(
                agent_at,
                format!("role '{}' (agent: api) {why}", r.name),
                "e.g. base_url: http://127.0.0.1:11434/v1, model: llama3.2, api_key_env: OPENAI_API_KEY (omit it for a local server without a key)",
            );
        }
        let preset_only = [("model", r.model.is_some()), ("args", !r.args.is_empty())];
        if Cli::from_agent(agent).is_none() && !(is_api && r.args.is_empty()) {
            if let Some((key, _)) = preset_only.iter().find(|(_, set)| *set) {
                return self.error(
                    agent_at,
                    format!(
                        "role '{}' sets `{key}`, which only an agent preset takes",
                        r.name
                    ),
                    "use `agent: claude`, `codex` or `gemini`, or write the flags into the command line",
                );
            }
        }
        Ok(())
    }

    /// No value of role `i` holds a control character (but a newline or a
    /// tab).
    fn values(&self, i: usize, r: &RoleConfig) -> Result<()> {
        if r.model
            .iter()
            .chain(&r.args)
            .chain(&r.prompt)
            .chain(&r.description)
            .chain(&r.base_url)
            .chain(&r.api_key_env)
            .any(|v| v.chars().any(|c| c.is_control() && c != '\n' && c != '\t'))
        {
            return self.error(
                self.at(i, |s| loc(&s.name)),
                format!("a value of role '{}' contains a control character", r.name),
                "remove it from `model`, `args`, `prompt`, `description`, `base_url` and `api_key_env`",
            );
        }
        Ok(())
    }

    /// Role `i`'s `permissions:` (launch/acp/predecided.rs): only
    /// `runtime: acp` takes them, and each key is a glob pattern. (An
    /// unknown decision is serde's error, naming `allow`, `deny`, `ask`.)
    fn permissions(&self, i: usize, r: &RoleConfig) -> Result<()> {
        if r.permissions.is_empty() {
            return Ok(());
        }
        let at = self.at(i, |s| loc(&s.name));
        if r.runtime != crate::protocol::config::Runtime::Acp {
            return self.error(
                at,
                format!(
                    "role '{}' sets `permissions`, which only `runtime: acp` takes",
                    r.name
                ),
                "add `runtime: acp` to the role (its agent's permission requests then come to the swarm), or remove `permissions`",
            );
        }
        for p in r.permissions.keys() {
            if let Some(why) = crate::launch::acp::predecided::pattern_problem(p) {
                return self.error(
                    at,
                    format!(
                        "role '{}': the `permissions` pattern '{}' {why}",
                        r.name,
                        escape(p)
                    ),
                    "write each key as `<kind>: <title>` as `swarm permissions` shows a tool, `*` for any run of characters, e.g. \"execute: cargo test*\": allow",
                );
            }
        }
        Ok(())
    }

    /// Role `i`'s worktree name is valid and, unless shared (`master`,
    /// `none`), no earlier role's.
    fn worktree(&self, i: usize, r: &RoleConfig, roles: &[RoleConfig]) -> Result<()> {
        let wt_at = self
            .at(i, |s| loc(&s.worktree))
            .or(self.at(i, |s| loc(&s.name)));
        if !valid_worktree_name(&r.worktree) {
            return self.error(
                wt_at,
                format!(
                    "invalid worktree '{}' for role '{}'",
                    escape(&r.worktree),
                    r.name
                ),
                "use `master` or `none` (the project root) or a name of letters, digits, '.', '_' and '-'",
            );
        }
        if !is_shared_worktree(&r.worktree) {
            if let Some(o) = roles[..i].iter().find(|o| o.worktree == r.worktree) {
                return self.error(
                    wt_at,
                    format!(
                        "worktree '{}' of role '{}' is already used by role '{}'",
                        r.worktree, r.name, o.name
                    ),
                    "each worktree belongs to one role; only `master` and `none` may be shared",
                );
            }
        }
        Ok(())
    }
}

/// A `swarm.yaml` human role that names a shared worktree (`master`,
/// `none`) where an agent works too: refused at its `worktree:` key.
pub(super) fn refuse_shared_person_inbox(
    roles: &[PlannedRole],
    path: &Path,
    sp: &[SpanRole],
    config: &[RoleConfig],
) -> Result<()> {
    let Some(s) = shared_human(roles).into_iter().next() else {
        return Ok(());
    };
    let at = config
        .iter()
        .position(|r| r.name == s.human)
        .and_then(|i| sp.get(i))
        .and_then(|r| loc(&r.worktree));
    Err(yaml_error(
        path,
        at,
        s.what(),
        &format!(
            "remove `worktree:` from role {}: a human role without it gets an inbox of its own ({}); or give it a worktree name of its own",
            s.human,
            Project::new(path.parent().unwrap_or(Path::new("."))).person_inbox(&s.human).display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::config::Config;

    #[test]
    fn preset_keys_need_a_preset() {
        let text = "roles:\n  - name: a\n    agent: sh a.sh\n    model: x\n";
        let c = Config::parse(text).unwrap();
        let e = validate_yaml_roles(&c.roles, text, Path::new("/p/swarm.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/p/swarm.yaml:3:")
                && e.contains("sets `model`, which only an agent preset takes"),
            "{e}"
        );
        let text = "roles:\n  - name: a\n    agent: gemini\n    model: x\n    args: [--debug]\n";
        let c = Config::parse(text).unwrap();
        validate_yaml_roles(&c.roles, text, Path::new("/p/swarm.yaml")).unwrap();
    }

    #[test]
    fn yaml_role_errors_have_positions() {
        let text =
            "roles:\n  - name: coder\n    agent: sh x.sh\n  - name: coder\n    agent: human\n";
        let c = Config::parse(text).unwrap();
        let e = validate_yaml_roles(&c.roles, text, Path::new("/p/swarm.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/p/swarm.yaml:4:")
                && e.contains("duplicate role 'coder' (first defined on line 2)"),
            "{e}"
        );
        let text = "roles:\n  - name: a_b\n    agent: x\n";
        let c = Config::parse(text).unwrap();
        let e = validate_yaml_roles(&c.roles, text, Path::new("/p/swarm.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/p/swarm.yaml:2:"), "{e}");
        let text = "roles:\n  - name: a\n";
        let c = Config::parse(text).unwrap();
        let e = validate_yaml_roles(&c.roles, text, Path::new("/p/swarm.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("role 'a' has no agent"), "{e}");
    }
}
