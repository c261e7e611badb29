//! The plan of a swarm: its roles, read from `swarm.yaml` (or SwarmForge's
//! `swarmforge/swarmforge.conf`) and checked, with every error's line and
//! column; what `swarm init` and `swarm up` act on.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::launch::agents::Cli;
use crate::protocol::config::{Config, Permission, RoleConfig};
use crate::protocol::grammar;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::people;
use crate::protocol::roles::{self, ReceiveMode, Role, Roles};
use crate::protocol::swarmforge_conf::{self, ConfAgent, ConfPaths};

/// What runs a role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentSpec {
    /// A person; never started, never woken.
    Human,
    /// A shell command line, run with `sh -c` in the role's worktree.
    Command(String),
    /// A SwarmForge model agent (`claude`, `codex`, `copilot`, `grok`) with
    /// the conf's extra arguments; started with SwarmForge's command line.
    Model { name: String, extra: Option<String> },
    /// A preset from `swarm.yaml` (`agent: claude | codex | gemini`),
    /// started the way that CLI documents (src/launch/agents/).
    Preset {
        cli: Cli,
        model: Option<String>,
        args: Vec<String>,
        permission: Permission,
        /// Each turn a non-interactive run read by `swarm turn`
        /// (`runtime: headless`, or `swarm up --no-tmux`).
        headless: bool,
    },
    /// `agent: api`: our own runner (`swarm run-api --role R`) asks an
    /// OpenAI-compatible chat-completion server; its keys stay in the role's
    /// `swarm.yaml` entry (base_url, model, api_key_env, …).
    Api,
}

impl AgentSpec {
    /// `roles.tsv` column 6: `human`, the model name, or the command's first
    /// word lower-cased.
    pub fn column(&self) -> String {
        match self {
            AgentSpec::Human => "human".into(),
            AgentSpec::Model { name, .. } => name.clone(),
            AgentSpec::Preset { cli, .. } => cli.name().to_string(),
            AgentSpec::Api => API_AGENT.into(),
            AgentSpec::Command(c) => c
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_lowercase(),
        }
    }
}

/// The `agent:` word for the built-in chat-completion runner.
pub const API_AGENT: &str = "api";

/// One role, with every derived value (docs/launcher.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedRole {
    pub name: String,
    pub worktree_name: String,
    pub worktree_path: PathBuf,
    pub session: String,
    pub display: String,
    pub mode: ReceiveMode,
    pub agent: AgentSpec,
}

impl PlannedRole {
    /// Roles in `master`/`none` work in the project root itself.
    pub fn in_root(&self) -> bool {
        is_shared_worktree(&self.worktree_name)
    }

    pub fn is_human(&self) -> bool {
        self.agent == AgentSpec::Human
    }

    /// A person's state-only inbox folder (protocol::people): no git
    /// worktree, no agent files.
    pub fn is_person_folder(&self) -> bool {
        people::is_person_folder(&self.worktree_name)
    }

    /// Where the role's commands run: a person with a state-only inbox
    /// works in the project root (their commands find that inbox).
    pub fn workdir(&self) -> &Path {
        match self.worktree_path.ancestors().nth(3) {
            Some(root) if self.is_person_folder() => root,
            _ => &self.worktree_path,
        }
    }

    /// Whether `swarm init` makes a git worktree for this role.
    pub fn has_own_checkout(&self) -> bool {
        !self.in_root() && !self.is_person_folder()
    }

    pub fn worktree(&self) -> Worktree {
        Worktree::new(&self.worktree_path)
    }
}

/// `master` and `none` mean the project root and may be shared.
pub use crate::protocol::grammar::{is_shared_worktree, valid_worktree_name};

/// Where the roles came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    SwarmYaml(PathBuf),
    SwarmforgeConf(PathBuf),
}

impl Source {
    pub fn path(&self) -> &Path {
        match self {
            Source::SwarmYaml(p) | Source::SwarmforgeConf(p) => p,
        }
    }
}

/// A project's roles and settings, ready to initialise and launch.
#[derive(Clone, Debug)]
pub struct Plan {
    pub project: Project,
    pub config: Config,
    pub roles: Vec<PlannedRole>,
    pub source: Source,
    /// Notes for the person (printed on stderr by the CLI).
    pub warnings: Vec<String>,
    /// Which of `hosts` this checkout is (None: a one-host swarm).
    pub host: Option<String>,
    /// Roles on other hosts: a proxy worktree each (`@<host>` in roles.tsv),
    /// drained by the bridge; never started or woken here.
    pub remote: Vec<PlannedRole>,
}

pub use crate::protocol::config::this_host;

/// Agents sharing a worktree share one inbox (SwarmForge's rule): any of them
/// may take any item, which surprises people who meant separate queues.
fn shared_inbox_warnings(roles: &[PlannedRole]) -> Vec<String> {
    let mut seen: Vec<(&Path, Vec<&str>)> = Vec::new();
    for r in roles.iter().filter(|r| !r.is_human()) {
        match seen
            .iter_mut()
            .find(|(p, _)| *p == r.worktree_path.as_path())
        {
            Some((_, names)) => names.push(&r.name),
            None => seen.push((&r.worktree_path, vec![&r.name])),
        }
    }
    seen.into_iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|(p, names)| {
            format!(
                "note: roles {} share the worktree {}, so they share one inbox: any of them may take any item\n  hint: give each its own `worktree:` name for separate queues",
                names.join(", "),
                p.display()
            )
        })
        .collect()
}

/// The human roles that would share an inbox with an agent.
fn shared_human(roles: &[PlannedRole]) -> Vec<people::SharedInbox> {
    let table = Roles::from_roles(
        roles
            .iter()
            .map(|r| Role {
                name: r.name.clone(),
                worktree_name: r.worktree_name.clone(),
                worktree_path: r.worktree_path.clone(),
                session: String::new(),
                display: String::new(),
                agent: r.agent.column(),
                mode: String::new(),
            })
            .collect(),
    );
    people::shared_inboxes(&table)
}

/// A `swarm.yaml` human role that names a shared worktree (`master`,
/// `none`) where an agent works too: refused at its `worktree:` key.
fn refuse_shared_person_inbox(
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

impl Plan {
    /// Reads `swarm.yaml`; its `roles:` win. Without roles there, the roles
    /// come from `swarmforge/swarmforge.conf` (daemon settings still come
    /// from `swarm.yaml`).
    pub fn load(root: &Path) -> Result<Plan> {
        let project = Project::new(root);
        let yaml_path = project.config_file();
        let config = Config::load(&yaml_path)?;
        let conf_path = project.swarmforge_conf();
        let mut warnings = Vec::new();
        if !config.roles.is_empty() {
            let text = std::fs::read_to_string(&yaml_path).unwrap_or_default();
            validate_yaml_roles(&config.roles, &text, &yaml_path)?;
            let names: Vec<String> = config.roles.iter().map(|r| r.name.clone()).collect();
            crate::board::routes::check_cards(&config.cards, &names, &yaml_path)?;
            if let Some(m) = &config.forum.moderator {
                if !config.roles.iter().any(|r| &r.name == m) {
                    return Err(Error::bad_file_hint(
                        &yaml_path,
                        format!(
                            "forum.moderator '{}' is not one of its roles",
                            crate::text::escape(m)
                        ),
                        "name a role from the `roles:` list",
                    ));
                }
            }
            if conf_path.exists() {
                warnings.push(format!(
                    "note: {} defines roles, so {} is ignored",
                    yaml_path.display(),
                    conf_path.display()
                ));
            }
            let host = this_host(&project, &config)?;
            let mut roles: Vec<PlannedRole> = Vec::new();
            let mut remote: Vec<PlannedRole> = Vec::new();
            let sp = spans(&text);
            for (i, r) in config.roles.iter().enumerate() {
                let mut p = planned(root, &r.name, &r.worktree, r.mode, yaml_agent(r));
                let explicit = sp.get(i).and_then(|s| s.worktree.as_ref()).is_some();
                let is_human = p.is_human();
                if is_human && p.in_root() {
                    // An explicit shared worktree next to an agent is
                    // refused below; otherwise a person's inbox is theirs.
                    let agent_in_root = config.roles.iter().any(|o| {
                        !matches!(yaml_agent(o), AgentSpec::Human)
                            && is_shared_worktree(&o.worktree)
                    });
                    if !(explicit && agent_in_root) {
                        p.worktree_name =
                            people::planned_worktree_name(&r.name, is_human, &r.worktree);
                        p.worktree_path = project.person_inbox(&r.name);
                    }
                }
                match (config.role_host(&r.name), host.as_deref()) {
                    (Some(h), Some(me)) if h != me => {
                        p.worktree_name = format!("@{h}");
                        p.worktree_path = project.bridge_proxy(&r.name);
                        p.session = String::new();
                        remote.push(p);
                    }
                    _ => roles.push(p),
                }
            }
            refuse_shared_person_inbox(&roles, &yaml_path, &sp, &config.roles)?;
            warnings.extend(shared_inbox_warnings(&roles));
            return Ok(Plan {
                project,
                config,
                roles,
                source: Source::SwarmYaml(yaml_path),
                warnings,
                host,
                remote,
            });
        }
        if !conf_path.exists() {
            return Err(Error::not_found(format!(
                "No roles defined for {}: add a `roles:` list to {} or write {}\n  hint: see docs/launcher.md, or run `swarm demo` for a working example",
                root.display(),
                yaml_path.display(),
                conf_path.display()
            )));
        }
        let conf = swarmforge_conf::load(&ConfPaths::for_root(root))?;
        warnings.extend(conf.notes.iter().map(|n| format!("note: {n}")));
        let roles: Vec<PlannedRole> = conf
            .roles
            .iter()
            .map(|c| {
                let agent = match &c.agent {
                    ConfAgent::Human => AgentSpec::Human,
                    ConfAgent::Model(m) => AgentSpec::Model {
                        name: m.clone(),
                        extra: c.extra.clone(),
                    },
                    ConfAgent::Command(w) => AgentSpec::Command(match &c.extra {
                        Some(x) => format!("{w} {x}"),
                        None => w.clone(),
                    }),
                };
                planned(root, &c.name, &c.worktree, c.mode, agent)
            })
            .collect();
        if let Some(s) = shared_human(&roles).first() {
            return Err(Error::env(format!(
                "{}: {}\n  hint: give {} a worktree of its own in {} (e.g. `window {} human {}`), or move the roles to {}, where a human role without `worktree:` gets an inbox of its own; then run `swarm init`\n  hint: items for {} already waiting in {} are moved into the new inbox by that `swarm init` (`swarm doctor` lists any left)",
                conf_path.display(),
                s.what(),
                s.human,
                conf_path.display(),
                s.human,
                s.human,
                yaml_path.display(),
                s.human,
                Worktree::new(&s.worktree).inbox_new().display()
            )));
        }
        warnings.extend(shared_inbox_warnings(&roles));
        Ok(Plan {
            project,
            config,
            roles,
            source: Source::SwarmforgeConf(conf_path),
            warnings,
            host: None,
            remote: Vec::new(),
        })
    }

    /// The `roles.tsv` text (docs/protocol.md §2): one line per role, in config
    /// order.
    pub fn roles_tsv(&self) -> String {
        Roles::from_roles(
            self.roles
                .iter()
                .chain(&self.remote)
                .map(|r| Role {
                    name: r.name.clone(),
                    worktree_name: r.worktree_name.clone(),
                    worktree_path: r.worktree_path.clone(),
                    session: r.session.clone(),
                    display: r.display.clone(),
                    agent: r.agent.column(),
                    mode: r.mode.as_str().to_string(),
                })
                .collect(),
        )
        .render()
    }

    /// This plan with every preset agent headless (`swarm up --no-tmux`:
    /// an interactive CLI would get no terminal).
    pub fn with_headless_presets(&self) -> Plan {
        let mut p = self.clone();
        for r in &mut p.roles {
            if let AgentSpec::Preset { headless, .. } = &mut r.agent {
                *headless = true;
            }
        }
        p
    }

    /// Distinct worktree paths, root first when any role works there.
    pub fn worktree_paths(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for r in &self.roles {
            if !out.contains(&r.worktree_path) {
                out.push(r.worktree_path.clone());
            }
        }
        out
    }
}

fn yaml_agent(r: &RoleConfig) -> AgentSpec {
    let a = r.agent.trim();
    if a.eq_ignore_ascii_case("human") {
        AgentSpec::Human
    } else if a == API_AGENT {
        AgentSpec::Api
    } else if let Some(cli) = Cli::from_agent(a) {
        AgentSpec::Preset {
            cli,
            model: r.model.clone(),
            args: r.args.clone(),
            permission: r.permission,
            headless: r.runtime == crate::protocol::config::Runtime::Headless,
        }
    } else {
        AgentSpec::Command(a.to_string())
    }
}

fn planned(
    root: &Path,
    name: &str,
    worktree: &str,
    mode: ReceiveMode,
    agent: AgentSpec,
) -> PlannedRole {
    let worktree_path = if is_shared_worktree(worktree) {
        root.to_path_buf()
    } else {
        root.join(".worktrees").join(worktree)
    };
    PlannedRole {
        name: name.to_string(),
        worktree_name: worktree.to_string(),
        worktree_path,
        session: format!("swarmforge-{name}"),
        display: roles::display_name(name),
        mode,
        agent,
    }
}

/// Where each role's keys sit in `swarm.yaml`, for error positions.
#[derive(Deserialize, Default)]
#[serde(default)]
struct SpanDoc {
    roles: Vec<SpanRole>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SpanRole {
    name: Option<serde_saphyr::Spanned<String>>,
    agent: Option<serde_saphyr::Spanned<String>>,
    worktree: Option<serde_saphyr::Spanned<String>>,
}

fn spans(text: &str) -> Vec<SpanRole> {
    serde_saphyr::from_str::<SpanDoc>(text)
        .map(|d| d.roles)
        .unwrap_or_default()
}

type Loc = Option<(u64, u64)>;

fn loc(s: &Option<serde_saphyr::Spanned<String>>) -> Loc {
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
            crate::text::escape(url)
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
                crate::text::escape(v)
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
    let sp = spans(text);
    let at = |i: usize, f: fn(&SpanRole) -> Loc| sp.get(i).and_then(f);
    // Name → first position, so checking a long table stays linear.
    let mut first_at: std::collections::HashMap<&str, usize> = Default::default();
    for (i, r) in roles.iter().enumerate() {
        let name_at = at(i, |s| loc(&s.name));
        if r.name.is_empty() {
            return Err(yaml_error(
                path,
                at(i, |s| loc(&s.agent)),
                format!("role #{} has no name", i + 1),
                "give every entry of `roles:` a `name:`",
            ));
        }
        if !grammar::valid_role(&r.name) {
            return Err(yaml_error(
                path,
                name_at,
                format!(
                    "invalid role name '{}'",
                    crate::text::escape(&r.name)
                ),
                "role names start with a letter or digit and contain only letters, digits and '-' (at most 64 characters)",
            ));
        }
        if let Some(why) = crate::protocol::grammar::reserved_role(&r.name) {
            return Err(yaml_error(
                path,
                name_at,
                format!("role name '{}' is reserved ({why})", r.name),
                "pick another name; `all` and `handoffd` mean something in every message",
            ));
        }
        if let Some(&j) = first_at.get(r.name.as_str()) {
            let first = at(j, |s| loc(&s.name))
                .map(|(l, _)| format!(" (first defined on line {l})"))
                .unwrap_or_default();
            return Err(yaml_error(
                path,
                name_at,
                format!("duplicate role '{}'{first}", r.name),
                "role names must be unique",
            ));
        }
        first_at.insert(r.name.as_str(), i);
        let agent = r.agent.trim();
        if agent.is_empty() {
            return Err(yaml_error(
                path,
                name_at,
                format!("role '{}' has no agent", r.name),
                "set `agent:` to a command line (run with sh -c in the role's worktree) or to `human`",
            ));
        }
        if agent.chars().any(|c| c.is_control()) {
            return Err(yaml_error(
                path,
                at(i, |s| loc(&s.agent)),
                format!(
                    "the agent of role '{}' contains a control character",
                    r.name
                ),
                "write the command on one line",
            ));
        }
        let is_api = agent == API_AGENT;
        let api_only = [
            ("base_url", r.base_url.is_some()),
            ("api_key_env", r.api_key_env.is_some()),
        ];
        if !is_api {
            if let Some((key, _)) = api_only.iter().find(|(_, set)| *set) {
                return Err(yaml_error(
                    path,
                    at(i, |s| loc(&s.agent)).or(name_at),
                    format!(
                        "role '{}' sets `{key}`, which only `agent: api` takes",
                        r.name
                    ),
                    "use `agent: api` with `base_url`, `model` and `api_key_env`, or remove the key",
                ));
            }
        } else if let Some(why) = api_problem(r) {
            return Err(yaml_error(
                path,
                at(i, |s| loc(&s.agent)).or(name_at),
                format!("role '{}' (agent: api) {why}", r.name),
                "e.g. base_url: http://127.0.0.1:11434/v1, model: llama3.2, api_key_env: OPENAI_API_KEY (omit it for a local server without a key)",
            ));
        }
        let preset_only = [("model", r.model.is_some()), ("args", !r.args.is_empty())];
        if Cli::from_agent(agent).is_none() && !(is_api && r.args.is_empty()) {
            if let Some((key, _)) = preset_only.iter().find(|(_, set)| *set) {
                return Err(yaml_error(
                    path,
                    at(i, |s| loc(&s.agent)).or(name_at),
                    format!(
                        "role '{}' sets `{key}`, which only an agent preset takes",
                        r.name
                    ),
                    "use `agent: claude`, `codex` or `gemini`, or write the flags into the command line",
                ));
            }
        }
        if r.model
            .iter()
            .chain(&r.args)
            .chain(&r.prompt)
            .chain(&r.description)
            .chain(&r.base_url)
            .chain(&r.api_key_env)
            .any(|v| v.chars().any(|c| c.is_control() && c != '\n' && c != '\t'))
        {
            return Err(yaml_error(
                path,
                name_at,
                format!("a value of role '{}' contains a control character", r.name),
                "remove it from `model`, `args`, `prompt`, `description`, `base_url` and `api_key_env`",
            ));
        }
        let wt_at = at(i, |s| loc(&s.worktree)).or(name_at);
        if !valid_worktree_name(&r.worktree) {
            return Err(yaml_error(
                path,
                wt_at,
                format!(
                    "invalid worktree '{}' for role '{}'",
                    crate::text::escape(&r.worktree),
                    r.name
                ),
                "use `master` or `none` (the project root) or a name of letters, digits, '.', '_' and '-'",
            ));
        }
        if !is_shared_worktree(&r.worktree) {
            if let Some(o) = roles[..i].iter().find(|o| o.worktree == r.worktree) {
                return Err(yaml_error(
                    path,
                    wt_at,
                    format!(
                        "worktree '{}' of role '{}' is already used by role '{}'",
                        r.worktree, r.name, o.name
                    ),
                    "each worktree belongs to one role; only `master` and `none` may be shared",
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_column() {
        assert_eq!(AgentSpec::Human.column(), "human");
        assert_eq!(AgentSpec::Command("  Sh agents/x.sh".into()).column(), "sh");
        assert_eq!(
            AgentSpec::Model {
                name: "codex".into(),
                extra: None
            }
            .column(),
            "codex"
        );
    }

    #[test]
    fn worktree_names() {
        for ok in ["master", "none", "coder", "a.b", "x_1"] {
            assert!(valid_worktree_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "-x", "a..b", "x.lock", "a b"] {
            assert!(!valid_worktree_name(bad), "{bad}");
        }
    }

    /// The defaults documented in the README are the real ones.
    #[test]
    fn documented_defaults_match() {
        let doc = include_str!("../../README.md");
        let blocks: Vec<&str> = doc
            .split("```yaml\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap())
            .collect();
        let all = Config::parse(blocks[0]).unwrap();
        assert_eq!(all, Config::default());
        let roles = Config::parse(blocks[1]).unwrap();
        let want = RoleConfig {
            name: "coder".into(),
            agent: "sh \"$SWARMFORGE_PROJECT/agents/coder.sh\"".into(),
            ..RoleConfig::default()
        };
        assert_eq!(roles.roles, vec![want]);
    }

    #[test]
    fn a_moderator_must_be_a_role() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("swarm.yaml"),
            "roles:\n  - name: a\n    agent: sh a.sh\nforum:\n  moderator: ghost\n",
        )
        .unwrap();
        let Err(e) = Plan::load(d.path()) else {
            panic!("a moderator that is not a role was accepted");
        };
        let e = e.to_string();
        assert!(
            e.contains("forum.moderator 'ghost' is not one of its roles"),
            "{e}"
        );
    }

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
