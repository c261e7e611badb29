//! A person's mail is theirs: a human role never shares an inbox with an
//! agent (docs/message-model.md, "Human roles").
//!
//! Roles that share a worktree share one inbox, and any of them may take any
//! item. An agent draining such an inbox completes the person's questions and
//! notes, and every receipt then says the person handled them. So a human
//! role without a worktree of its own gets a state-only folder,
//! `.swarmforge/people/<role>` (worktree name `people/<role>` in roles.tsv):
//! worktree-shaped, no git checkout, nothing but its `.swarmforge/handoffs`.
//! A table that still puts a human role and an agent role in one worktree is
//! refused by `swarm init`/`swarm up`/`handoffd`; [`shared_inboxes`] is the
//! one place that finds it.

use crate::protocol::header::names;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;

/// Column 2 of a person's state-only folder starts with this; a real
/// worktree name cannot contain `/`, so the two never collide.
pub const WORKTREE_PREFIX: &str = "people/";

/// Column 2 of roles.tsv for `role`'s state-only folder.
pub fn worktree_name(role: &str) -> String {
    format!("{WORKTREE_PREFIX}{role}")
}

/// Column 2 for a role `swarm init` lays out from a configured worktree
/// name: a human role at the shared checkout (`master`, `none`) gets its
/// own folder (one rule, also for the mirrors of other hosts' roles).
pub fn planned_worktree_name(role: &str, human: bool, configured: &str) -> String {
    if human && matches!(configured, "master" | "none") {
        worktree_name(role)
    } else {
        configured.to_string()
    }
}

/// Whether a roles.tsv worktree name is a person's state-only folder.
pub fn is_person_folder(worktree_name: &str) -> bool {
    worktree_name.starts_with(WORKTREE_PREFIX)
}

/// A human role whose inbox is an agent's too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedInbox {
    pub human: String,
    /// The agent roles working in the same worktree, in table order.
    pub agents: Vec<String>,
    pub worktree: PathBuf,
}

fn same(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// Every human role (on this host) that shares its worktree with an agent
/// role, in table order.
pub fn shared_inboxes(roles: &Roles) -> Vec<SharedInbox> {
    let local = || roles.roles.iter().filter(|r| !r.is_remote());
    local()
        .filter(|h| h.is_human())
        .filter_map(|h| {
            let agents: Vec<String> = local()
                .filter(|a| !a.is_human() && same(&a.worktree_path, &h.worktree_path))
                .map(|a| a.name.clone())
                .collect();
            (!agents.is_empty()).then(|| SharedInbox {
                human: h.name.clone(),
                agents,
                worktree: h.worktree_path.clone(),
            })
        })
        .collect()
}

impl SharedInbox {
    /// `roles boss (human) and lead (agent) share the worktree /p, so …`
    pub fn what(&self) -> String {
        let agents = self.agents.join(", ");
        let (noun, verb) = if self.agents.len() > 1 {
            ("agents", "take")
        } else {
            ("agent", "takes")
        };
        format!(
            "roles {} (human) and {agents} ({noun}) share the worktree {}, so one inbox: {agents}'s ready-next {verb} {}'s mail and the receipts say {} handled it",
            self.human,
            self.worktree.display(),
            self.human,
            self.human
        )
    }

    /// The migration of a table written by hand or by SwarmForge's launcher.
    pub fn tsv_hint(&self, project: &Project) -> String {
        let own = project.person_inbox(&self.human);
        format!(
            "  hint: give {h} an inbox of its own: describe the roles in {yaml} (a human role without `worktree:` gets {own}) and run `swarm init`, or set columns 2 and 3 of {h} in {tsv} to {name} and {own} yourself\n  hint: SwarmForge project: items for {h} already waiting in {new} are moved into {own_new} by `swarm init`; after a change by hand move them yourself (`swarm doctor` lists them)",
            h = self.human,
            yaml = project.config_file().display(),
            own = own.display(),
            tsv = project.roles_tsv().display(),
            name = worktree_name(&self.human),
            new = crate::protocol::layout::Worktree::new(&self.worktree)
                .inbox_new()
                .display(),
            own_new = crate::protocol::layout::Worktree::new(&own)
                .inbox_new()
                .display(),
        )
    }
}

/// The refusal of a roles.tsv with a shared human inbox (`handoffd`,
/// `swarm up` on an existing table): every pair, then the repair.
pub fn check_table(project: &Project, roles: &Roles) -> Result<(), Error> {
    let shared = shared_inboxes(roles);
    let Some(first) = shared.first() else {
        return Ok(());
    };
    let mut msg = shared
        .iter()
        .map(SharedInbox::what)
        .collect::<Vec<_>>()
        .join("; ");
    msg.push_str("; nothing is delivered until each person has an inbox of their own\n");
    msg.push_str(&first.tsv_hint(project));
    Err(Error::bad_file(project.roles_tsv(), msg))
}

/// Whether a copy in an inbox is meant for `role` (its `recipient`, its
/// `to` or its `cc` names it; roles sharing a worktree share an inbox).
pub fn meant_for(m: &crate::protocol::header::Message, role: &str) -> bool {
    use crate::protocol::grammar;
    let from = m.sender().unwrap_or("");
    m.recipient() == Some(role)
        || grammar::addressed(m.to().unwrap_or(""), from, role)
        || grammar::role_list(m.get(names::CC)).contains(&role)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_human_beside_an_agent_only() {
        let r = Roles::parse(
            "lead\tmaster\t/p\ts\tL\tclaude\ttask\nboss\tmaster\t/p\ts\tB\thuman\ttask\n\
             qa\tpeople/qa\t/p/.swarmforge/people/qa\ts\tQ\thuman\ttask\n\
             far\t@h2\t/p/.swarmforge/bridge/out/far\t\tF\thuman\ttask\n",
        );
        let s = shared_inboxes(&r);
        assert_eq!(
            s,
            vec![SharedInbox {
                human: "boss".into(),
                agents: vec!["lead".into()],
                worktree: "/p".into()
            }]
        );
        let e = check_table(&Project::new("/p"), &r)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("roles boss (human) and lead (agent) share the worktree /p")
                && e.contains("/p/.swarmforge/people/boss"),
            "{e}"
        );
        assert!(is_person_folder(&worktree_name("qa")));
    }
}
