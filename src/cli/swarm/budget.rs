//! `swarm budget` (every budget's standing) and `swarm budget raise`
//! (docs/cost.md, "Budgets").

use crate::telemetry::budget;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Budgets are set in swarm.yaml: `budget: {tokens: N, cost: X, per: day|swarm}` \
per role and at the top level for the whole swarm. A role whose budget (or the \
swarm's) is used up is parked: no wake-up, no new headless or API turn; the \
item it works on stays in process. `swarm budget raise <role> --tokens N \
--cost X` adds to a budget for its current period (`all` names the swarm's \
budget); a `per: day` budget starts from zero each UTC day.
Exit 0; 1 on a usage or environment error; 2 PERSON_ONLY (raise run by an \
agent, docs/security.md).")]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    #[command(flatten)]
    pub out: super::JsonArg,
}

#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Add to a role's budget (or the swarm's: `all`) for the current period
    Raise {
        /// The role, or `all` for the whole swarm's budget
        role: String,
        /// Tokens to add
        #[arg(long, default_value_t = 0)]
        tokens: u64,
        /// US dollars to add
        #[arg(long, default_value_t = 0.0)]
        cost: f64,
    },
}

pub fn run(args: Args) -> i32 {
    match args.action {
        None => super::answer(
            None,
            args.out.json,
            budget::load,
            |b| crate::cli::stamped(serde_json::to_value(b).unwrap_or_default()),
            budget::text,
        ),
        Some(Action::Raise { role, tokens, cost }) => super::answer(
            None,
            args.out.json,
            |p| {
                crate::agent::caller::Caller::of(p)?.require_person("swarm budget raise")?;
                let r = budget::raise(p, &role, tokens, cost)?;
                crate::daemon::journal::record_outside(
                    p,
                    &crate::daemon::journal::Event::new(crate::daemon::journal::Kind::BudgetRaised)
                        .recipient(&role)
                        .reason(format!(
                            "+{} tokens, +{} for {}",
                            r.tokens,
                            crate::telemetry::cost::dollars(r.cost_usd),
                            r.period
                        )),
                );
                let still = budget::parked(p, &role);
                Ok((r, still))
            },
            |(r, still)| {
                crate::cli::stamped(serde_json::json!({
                    "status": "raised", "raise": r, "parked": still,
                }))
            },
            |(r, still)| {
                let mut s = format!(
                    "raised the budget of {} by {} tokens and {} for {}\n",
                    r.target,
                    r.tokens,
                    crate::telemetry::cost::dollars(r.cost_usd),
                    r.period
                );
                if let Some(why) = still {
                    s.push_str(&format!("still parked: {}\n", why.words()));
                }
                s
            },
        ),
    }
}
