//! The plan of a swarm: its roles, read from `swarm.yaml` (or SwarmForge's
//! `swarmforge/swarmforge.conf`) and checked, with every error's line and
//! column; what `swarm init` and `swarm up` act on.
//!
//! Invariant: a plan is checked whole before anything acts on it (roles by
//! [`validate`], cards, the moderator, shared inboxes); a role on another
//! host is planned as its proxy, never started here.

use std::path::{Path, PathBuf};

use crate::board::routes::check_cards;
use crate::error::{Error, Result};
use crate::launch::agents::Cli;
use crate::protocol::config::{Config, Permission, RoleConfig, Runtime};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::people;
use crate::protocol::roles::{self, ReceiveMode, Role, Roles};
use crate::protocol::swarmforge_conf::{self, ConfAgent, ConfPaths};
use crate::text::escape;

mod validate;

pub use validate::{api_problem, validate_yaml_roles};
use validate::{refuse_shared_person_inbox, spans};

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
    /// started the way that CLI documents (crates/swarm-launch/src/launch/agents/).
    Preset {
        cli: Cli,
        model: Option<String>,
        args: Vec<String>,
        permission: Permission,
        /// Each turn a non-interactive run read by `swarm turn`
        /// (`runtime: headless`, or `swarm up --no-tmux`).
        headless: bool,
        /// One ACP session driven by `swarm acp` (`runtime: acp`, in tmux
        /// or headless alike).
        acp: bool,
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

impl Plan {
    /// Reads `swarm.yaml`; its `roles:` win. Without roles there, the roles
    /// come from `swarmforge/swarmforge.conf` (daemon settings still come
    /// from `swarm.yaml`).
    pub fn load(root: &Path) -> Result<Plan> {
        let project = Project::new(root);
        // swarm.yaml is read once: its text gives `from_yaml` the positions.
        let (config, text) = Config::load_with_text(&project.config_file())?;
        Plan::from_loaded(project, config, &text)
    }

    /// [`Plan::load`] with swarm.yaml already read (`config`, from `text`).
    pub fn from_loaded(project: Project, config: Config, text: &str) -> Result<Plan> {
        let root = &project.root;
        if !config.roles.is_empty() {
            return Plan::from_yaml(project, config, text);
        }
        let conf_path = project.swarmforge_conf();
        if !conf_path.exists() {
            return Err(Error::not_found(format!(
                "No roles defined for {}: add a `roles:` list to {} or write {}\n  hint: see docs/launcher.md, or run `swarm demo` for a working example",
                root.display(),
                project.config_file().display(),
                conf_path.display()
            )));
        }
        Plan::from_conf(project, config)
    }

    /// The plan of `swarm.yaml`'s `roles:`, checked.
    fn from_yaml(project: Project, config: Config, text: &str) -> Result<Plan> {
        let yaml_path = project.config_file();
        let conf_path = project.swarmforge_conf();
        let mut warnings = Vec::new();
        validate_yaml_roles(&config.roles, text, &yaml_path)?;
        let names: Vec<String> = config.roles.iter().map(|r| r.name.clone()).collect();
        check_cards(&config.cards, &names, &yaml_path)?;
        if let Some(m) = &config.forum.moderator {
            if !config.roles.iter().any(|r| &r.name == m) {
                return Err(Error::bad_file_hint(
                    &yaml_path,
                    format!("forum.moderator '{}' is not one of its roles", escape(m)),
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
        let sp = spans(text);
        for (i, r) in config.roles.iter().enumerate() {
            let explicit = sp.get(i).and_then(|s| s.worktree.as_ref()).is_some();
            let p = yaml_role(&project, &config, r, explicit);
            match (config.role_host(&r.name), host.as_deref()) {
                (Some(h), Some(me)) if h != me => {
                    remote.push(PlannedRole {
                        worktree_name: format!("@{h}"),
                        worktree_path: project.bridge_proxy(&r.name),
                        session: String::new(),
                        ..p
                    });
                }
                _ => roles.push(p),
            }
        }
        refuse_shared_person_inbox(&roles, &yaml_path, &sp, &config.roles)?;
        warnings.extend(shared_inbox_warnings(&roles));
        Ok(Plan {
            project,
            config,
            roles,
            source: Source::SwarmYaml(yaml_path),
            warnings,
            host,
            remote,
        })
    }

    /// The plan of SwarmForge's `swarmforge/swarmforge.conf` (daemon
    /// settings still from `swarm.yaml`).
    fn from_conf(project: Project, config: Config) -> Result<Plan> {
        let root = project.root.clone();
        let yaml_path = project.config_file();
        let conf_path = project.swarmforge_conf();
        let mut warnings = Vec::new();
        let conf = swarmforge_conf::load(&ConfPaths::for_root(&root))?;
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
                planned(&root, &c.name, &c.worktree, c.mode, agent)
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
            headless: r.runtime == Runtime::Headless,
            acp: r.runtime == Runtime::Acp,
        }
    } else {
        AgentSpec::Command(a.to_string())
    }
}

/// A `swarm.yaml` role as planned on this host. A person's role in the
/// project root gets an inbox of its own, unless its `worktree:` names the
/// root explicitly where an agent works too (refused later, at that key).
fn yaml_role(project: &Project, config: &Config, r: &RoleConfig, explicit: bool) -> PlannedRole {
    let mut p = planned(&project.root, &r.name, &r.worktree, r.mode, yaml_agent(r));
    let is_human = p.is_human();
    if is_human && p.in_root() {
        let agent_in_root = config
            .roles
            .iter()
            .any(|o| !matches!(yaml_agent(o), AgentSpec::Human) && is_shared_worktree(&o.worktree));
        if !(explicit && agent_in_root) {
            p.worktree_name = people::planned_worktree_name(&r.name, is_human, &r.worktree);
            p.worktree_path = project.person_inbox(&r.name);
        }
    }
    p
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
        let doc = include_str!("../../../../../README.md");
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
}
