//! What `swarm status` and `swarm audit` show of the agents' turns: per
//! role, the tokens and cost of all its turns and whether a budget parks it
//! (docs/cost.md). One read of the journal serves both.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::protocol::clock;
use crate::protocol::layout::Project;
use crate::protocol::swarm::Swarm;
use crate::telemetry::budget::{self, Reason};
use crate::telemetry::cost::{self, Tally};

/// One role's spending.
#[derive(Clone, Debug, Serialize)]
pub struct RoleSpend {
    pub role: String,
    #[serde(flatten)]
    pub tally: Tally,
    /// Set while a budget parks the role.
    pub parked: Option<Reason>,
}

/// Every role with turns or a budget; the journal's skipped lines.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Spend {
    pub roles: Vec<RoleSpend>,
    pub skipped_lines: usize,
}

impl Spend {
    pub fn parked(&self) -> impl Iterator<Item = (&str, &Reason)> {
        self.roles
            .iter()
            .filter_map(|r| r.parked.as_ref().map(|p| (r.role.as_str(), p)))
    }
}

/// Reads the journal, the config and the raises once. Unreadable ones give
/// an empty answer: status and audit show the rest.
pub fn collect(project: &Project) -> Spend {
    collect_in(&Swarm::new(project.clone()))
}

/// [`collect`] in a loaded swarm.
pub fn collect_in(swarm: &Swarm) -> Spend {
    let project = &swarm.project;
    let Ok((config, records, skipped)) = cost::load_in(swarm) else {
        return Spend::default();
    };
    let raises = budget::read_raises(project)
        .map(|r| r.0)
        .unwrap_or_default();
    let budgets = budget::Budgets {
        budgets: budget::standings(config, &records, &raises, clock::now()),
        skipped_lines: 0,
    };
    let mut by_role: BTreeMap<String, Tally> = BTreeMap::new();
    for u in &records {
        by_role.entry(u.role.clone()).or_default().add(config, u);
    }
    for r in config.roles.iter().filter(|r| r.budget.is_some()) {
        by_role.entry(r.name.clone()).or_default();
    }
    if config.budget.is_some() {
        for r in &config.roles {
            by_role.entry(r.name.clone()).or_default();
        }
    }
    Spend {
        roles: by_role
            .into_iter()
            .map(|(role, tally)| RoleSpend {
                parked: budgets.parked(&role),
                role,
                tally,
            })
            .collect(),
        skipped_lines: skipped,
    }
}

/// The `TOKENS AND COST` lines (empty when no turn was journaled and no
/// budget is set).
pub fn text(s: &Spend) -> String {
    if s.roles.is_empty() {
        return String::new();
    }
    let mut out = String::from("TOKENS AND COST (swarm cost)\n");
    for r in &s.roles {
        out.push_str(&format!(
            "  {:<16} {:>5} turns  {}\n",
            r.role,
            r.tally.turns,
            r.tally.words()
        ));
    }
    for (role, why) in s.parked() {
        out.push_str(&format!(
            "PARKED {role}: {}  -> {}\n",
            why.words(),
            why.handle()
        ));
    }
    if s.skipped_lines > 0 {
        out.push_str(&format!(
            "  ({} unreadable lines of the usage journal skipped)\n",
            s.skipped_lines
        ));
    }
    out
}
