//! Who is calling: a person, or an agent (docs/security.md, "Who is
//! calling"). What only a person may do (answer a clarify as a human role,
//! approve, deny, pause, resume, raise a budget, start a card, mark a
//! person's item done) asks this first ([`Caller::require_person`]); what a
//! role does in its own name (reserve, release, mark its own item done) asks
//! whether the caller may act as that role ([`Caller::require_acting_as`]).
//!
//! Every agent runs under `SWARMFORGE_ROLE=<role>`, set by the launcher and
//! inherited by everything the agent starts. A person's shell does not have
//! it. An agent can unset or change the variable in its own shell, but not
//! in the environment its ancestors were started with (the kernel's
//! `/proc/<pid>/environ`), so the chain of parents is read too. Without
//! confinement this is a line against a confused agent, not a determined
//! one (an agent can start a process outside its own tree, e.g. through
//! tmux); confinement (docs/security.md) is what makes it hold.
//!
//! A person's own pane in the swarm's tmux names their human role; a
//! process whose every role is a human role is that person ([`Caller::of`]).

use std::path::Path;

/// How far up the parent chain we look (a shell in an agent CLI in a
/// wrapper in tmux is about five).
const MAX_ANCESTORS: usize = 64;

/// The caller of a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// No agent role anywhere in this process's ancestry.
    Person,
    /// An agent: every role named by `SWARMFORGE_ROLE` in this process and
    /// its ancestors (normally one).
    Agent(Vec<String>),
}

impl Caller {
    /// An agent acting as `role` (the MCP server's `--role`).
    pub fn agent(role: &str) -> Caller {
        Caller::Agent(vec![role.to_string()])
    }

    /// The caller of this process: its own environment and its ancestors'.
    pub fn detect() -> Caller {
        let mut roles = Vec::new();
        // Read as bytes: a role that is not UTF-8 is still an agent's.
        if let Some(r) = std::env::var_os("SWARMFORGE_ROLE") {
            push_role(&mut roles, &r.to_string_lossy());
        }
        let mut pid = parent_of(Path::new("/proc/self"));
        for _ in 0..MAX_ANCESTORS {
            let Some(p) = pid.filter(|p| *p > 1) else {
                break;
            };
            let dir = Path::new("/proc").join(p.to_string());
            if let Ok(env) = std::fs::read(dir.join("environ")) {
                for var in env.split(|b| *b == 0) {
                    if let Some(v) = var.strip_prefix(b"SWARMFORGE_ROLE=") {
                        push_role(&mut roles, &String::from_utf8_lossy(v));
                    }
                }
            }
            pid = parent_of(&dir);
        }
        if roles.is_empty() {
            Caller::Person
        } else {
            Caller::Agent(roles)
        }
    }

    /// The caller of this process in a project: [`Caller::detect`], where a
    /// process naming only human roles (a person's pane) is a person.
    pub fn of(project: &crate::protocol::layout::Project) -> crate::error::Result<Caller> {
        let roles = crate::protocol::roles::Roles::load(&project.roles_tsv())?;
        Ok(Caller::detect().people_as_persons(&roles))
    }

    /// A caller whose every role is a human role counts as a person.
    pub fn people_as_persons(self, roles: &crate::protocol::roles::Roles) -> Caller {
        match &self {
            Caller::Agent(rs)
                if rs
                    .iter()
                    .all(|r| roles.find(r).is_some_and(|x| x.is_human())) =>
            {
                Caller::Person
            }
            _ => self,
        }
    }

    /// Whether this caller may act as `role`: a person as any role, an
    /// agent only as itself (every role in its ancestry is `role`).
    pub fn may_act_as(&self, role: &str) -> bool {
        match self {
            Caller::Person => true,
            Caller::Agent(roles) => roles.iter().all(|r| r == role),
        }
    }

    /// Refuses an agent (`PERSON_ONLY`, exit 2): `what` is a person's
    /// decision (approve, deny, pause, resume).
    pub fn require_person(&self, what: &str) -> crate::error::Result<()> {
        match self {
            Caller::Person => Ok(()),
            Caller::Agent(_) => Err(crate::error::Error::refused(
                crate::error::Token::PersonOnly,
                format!(
                    "{what} is a person's decision; this is {} (SWARMFORGE_ROLE in this process or its parents, docs/security.md).",
                    self.describe()
                ),
                vec![],
            )),
        }
    }

    /// Refuses an agent acting as another role (`PERSON_ONLY`, exit 2): a
    /// person may act as any role, an agent only as its own. `human` says
    /// `role` is a person's, whose items only that person handles; `what`
    /// names the command (`swarm inbox done`, `swarm release`).
    pub fn require_acting_as(
        &self,
        role: &str,
        human: bool,
        what: &str,
    ) -> crate::error::Result<()> {
        if self.may_act_as(role) {
            return Ok(());
        }
        let whose = if human {
            format!(
                "{} is a person, and {what} for them is a person's decision",
                crate::text::escape(role)
            )
        } else {
            format!(
                "{what} as {} is that agent's or a person's to do",
                crate::text::escape(role)
            )
        };
        Err(crate::error::Error::refused(
            crate::error::Token::PersonOnly,
            format!(
                "{whose}; this is {} (SWARMFORGE_ROLE in this process or its parents, docs/security.md).",
                self.describe()
            ),
            vec![],
        ))
    }

    /// The agent's role(s), for messages (`coder`, or `coder, boss`).
    pub fn describe(&self) -> String {
        match self {
            Caller::Person => "a person".to_string(),
            Caller::Agent(roles) => format!("agent {}", roles.join(", ")),
        }
    }
}

fn push_role(roles: &mut Vec<String>, r: &str) {
    let r = crate::text::escape(r);
    if !r.is_empty() && !roles.contains(&r) {
        roles.push(r);
    }
}

/// The parent pid from `<proc dir>/stat` (the field after the command
/// name, which may itself hold spaces and parentheses).
fn parent_of(proc_dir: &Path) -> Option<u32> {
    let stat = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_acts_only_as_itself() {
        assert!(Caller::Person.may_act_as("boss"));
        assert!(Caller::agent("coder").may_act_as("coder"));
        assert!(!Caller::agent("coder").may_act_as("boss"));
        let two = Caller::Agent(vec!["coder".into(), "boss".into()]);
        assert!(!two.may_act_as("boss"));
    }

    #[test]
    fn the_parent_of_this_process_is_read() {
        assert!(parent_of(Path::new("/proc/self")).is_some_and(|p| p > 0));
    }
}
