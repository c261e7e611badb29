//! Budgets (docs/cost.md, "Budgets"): `budget: {tokens, cost, per}` per role
//! and for the whole swarm. A role whose budget (or the swarm's) is used up
//! in the current period is *parked*: the daemon types no wake-up into it
//! and no new headless or API turn starts. A turn already running ends as
//! it would, and the item it works on stays in process, so nothing is lost
//! or half-done at the limit.
//!
//! Parking is derived, never stored: it is what the usage journal, the
//! config and the raises say at the moment it is asked. A raise
//! (`swarm budget raise`) is one line appended to
//! `.swarmforge/telemetry/budget-raises.jsonl` and counts in the period it
//! was made in only; the next day of a `per: day` budget starts from zero.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock::{self, Instant};
use crate::protocol::config::{Budget, BudgetPeriod, Config};
use crate::protocol::layout::Project;
use crate::telemetry::cost::{self, Tally};
use crate::telemetry::usage::{self, Usage};

/// The name a raise of the whole swarm's budget goes by (never a role's
/// name: `all` is the protocol's broadcast address).
pub const SWARM: &str = "all";

/// The raises file's longest line; longer ones are skipped.
const MAX_RAISE_LINE: usize = 4096;

/// One `swarm budget raise`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Raise {
    pub time: String,
    /// A role, or [`SWARM`].
    pub target: String,
    /// `2026-12-02` for a `per: day` budget, `swarm` for `per: swarm`.
    pub period: String,
    #[serde(default)]
    pub tokens: u64,
    #[serde(default)]
    pub cost_usd: f64,
}

/// Why a role is parked: the budget reached, what was used, the limit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reason {
    /// The role whose budget it is, or [`SWARM`].
    pub budget_of: String,
    pub per: BudgetPeriod,
    pub period: String,
    pub used_tokens: u64,
    pub used_cost_usd: f64,
    /// The limits in force, raises included.
    pub limit_tokens: Option<u64>,
    pub limit_cost_usd: Option<f64>,
}

impl Reason {
    /// One line: `budget of coder reached: 1200 of 1000 tokens (day 2026-12-02)`.
    pub fn words(&self) -> String {
        let whose = if self.budget_of == SWARM {
            "the swarm's budget".to_string()
        } else {
            format!("budget of {}", self.budget_of)
        };
        let mut parts = Vec::new();
        if let Some(l) = self.limit_tokens.filter(|l| self.used_tokens >= *l) {
            parts.push(format!("{} of {l} tokens", self.used_tokens));
        }
        if let Some(l) = self.limit_cost_usd.filter(|l| self.used_cost_usd >= *l) {
            parts.push(format!(
                "{} of {}",
                cost::dollars(self.used_cost_usd),
                cost::dollars(l)
            ));
        }
        let when = match self.per {
            BudgetPeriod::Day => format!("day {}", self.period),
            BudgetPeriod::Swarm => "the swarm's life".into(),
        };
        format!("{whose} reached: {} ({when})", parts.join(", "))
    }

    /// The command that lets the role go on.
    pub fn handle(&self) -> String {
        let mut s = format!("swarm budget raise {}", self.budget_of);
        if self.limit_tokens.is_some() {
            s.push_str(" --tokens N");
        }
        if self.limit_cost_usd.is_some() {
            s.push_str(" --cost X");
        }
        s
    }
}

/// One budget's state in its current period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Standing {
    /// A role, or [`SWARM`].
    pub budget_of: String,
    pub budget: Budget,
    pub period: String,
    pub used: Tally,
    pub raised_tokens: u64,
    pub raised_cost_usd: f64,
    /// Set when the budget is used up.
    pub reached: Option<Reason>,
}

/// Every budget's standing, and which roles are parked by which.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Budgets {
    pub budgets: Vec<Standing>,
    /// Unreadable lines of the usage journal and of the raises file.
    pub skipped_lines: usize,
}

impl Budgets {
    /// Why `role` is parked (its own budget first, then the swarm's).
    pub fn parked(&self, role: &str) -> Option<Reason> {
        let of = |who: &str| {
            self.budgets
                .iter()
                .find(|s| s.budget_of == who)
                .and_then(|s| s.reached.clone())
        };
        of(role).or_else(|| of(SWARM))
    }
}

/// The key of the period `per` that holds `t`.
pub fn period_of(per: BudgetPeriod, t: Instant) -> String {
    match per {
        BudgetPeriod::Day => t.format("%Y-%m-%d").to_string(),
        BudgetPeriod::Swarm => "swarm".into(),
    }
}

fn in_period(u: &Usage, per: BudgetPeriod, period: &str) -> bool {
    match per {
        BudgetPeriod::Swarm => true,
        BudgetPeriod::Day => cost::day_of(u).as_deref() == Some(period),
    }
}

/// The standing of every configured budget at `now`.
pub fn standings(
    config: &Config,
    records: &[Usage],
    raises: &[Raise],
    now: Instant,
) -> Vec<Standing> {
    let mut all: Vec<(String, &Budget)> = config
        .roles
        .iter()
        .filter_map(|r| r.budget.as_ref().map(|b| (r.name.clone(), b)))
        .collect();
    if let Some(b) = &config.budget {
        all.push((SWARM.to_string(), b));
    }
    all.into_iter()
        .map(|(who, b)| {
            let period = period_of(b.per, now);
            let mut used = Tally::default();
            for u in records
                .iter()
                .filter(|u| who == SWARM || u.role == who)
                .filter(|u| in_period(u, b.per, &period))
            {
                used.add(config, u);
            }
            let (mut raised_tokens, mut raised_cost_usd) = (0u64, 0.0f64);
            for r in raises
                .iter()
                .filter(|r| r.target == who && r.period == period)
            {
                raised_tokens = raised_tokens.saturating_add(r.tokens);
                raised_cost_usd += r.cost_usd;
            }
            let limit_tokens = b.tokens.map(|t| t.saturating_add(raised_tokens));
            let limit_cost_usd = b.cost.map(|c| c + raised_cost_usd);
            let over = limit_tokens.is_some_and(|l| used.total_tokens >= l)
                || limit_cost_usd.is_some_and(|l| used.cost_usd >= l);
            let reached = over.then(|| Reason {
                budget_of: who.clone(),
                per: b.per,
                period: period.clone(),
                used_tokens: used.total_tokens,
                used_cost_usd: used.cost_usd,
                limit_tokens,
                limit_cost_usd,
            });
            Standing {
                budget_of: who,
                budget: b.clone(),
                period,
                used,
                raised_tokens,
                raised_cost_usd,
                reached,
            }
        })
        .collect()
}

/// Every budget's standing now, read from the files. A fresh read of
/// swarm.yaml on purpose: [`parked`] is asked before each turn by
/// long-running processes (handoffd, the supervisor, the API runner), and a
/// budget changed in swarm.yaml counts from the next turn.
pub fn load(project: &Project) -> Result<Budgets> {
    load_with(project, &Config::load(&project.config_file())?)
}

/// [`load`] with the swarm's config already read.
pub fn load_with(project: &Project, config: &Config) -> Result<Budgets> {
    if config.budget.is_none() && config.roles.iter().all(|r| r.budget.is_none()) {
        return Ok(Budgets::default());
    }
    let (raises, skipped_raises) = read_raises(project)?;
    usage::with_all(project, |records, skipped| Budgets {
        budgets: standings(config, records, &raises, clock::now()),
        skipped_lines: skipped + skipped_raises,
    })
}

/// Why `role` is parked now, or None when it may take a turn. The call the
/// daemon's wake path and every turn runner (headless supervisor, API
/// runner) make before starting a turn. A journal or config that cannot be
/// read parks nobody: a budget never stops work by accident.
pub fn parked(project: &Project, role: &str) -> Option<Reason> {
    load(project).ok()?.parked(role)
}

/// Every raise, oldest first, and how many lines were skipped.
pub fn read_raises(project: &Project) -> Result<(Vec<Raise>, usize)> {
    crate::telemetry::jsonl::read(&raises_file(project), MAX_RAISE_LINE, |r: &Raise| {
        r.cost_usd.is_finite() && r.cost_usd >= 0.0
    })
}

pub fn raises_file(project: &Project) -> std::path::PathBuf {
    project.telemetry_dir().join("budget-raises.jsonl")
}

/// `swarm budget raise <target> [--tokens N] [--cost X]`: adds to the
/// budget of `target` (a role with a budget, or [`SWARM`]) for its current
/// period. A target without a budget, or a raise of nothing, is a usage
/// error.
pub fn raise(project: &Project, target: &str, tokens: u64, cost_usd: f64) -> Result<Raise> {
    let config = Config::load(&project.config_file())?;
    let budget = if target == SWARM {
        config.budget.as_ref()
    } else {
        config.role(target).and_then(|r| r.budget.as_ref())
    };
    let Some(budget) = budget else {
        return Err(Error::not_found(format!(
            "{} has no budget in {}\n  hint: set `budget: {{tokens: N, cost: X, per: day|swarm}}` there ({} for the whole swarm's)",
            if target == SWARM {
                "the swarm".to_string()
            } else {
                format!("role '{}'", crate::text::escape(target))
            },
            project.config_file().display(),
            SWARM
        )));
    };
    if !cost_usd.is_finite() || cost_usd < 0.0 {
        return Err(Error::bad_input(format!(
            "--cost: {cost_usd} is not an amount of dollars"
        )));
    }
    if tokens == 0 && cost_usd == 0.0 {
        return Err(Error::bad_input(
            "say how much to raise by: --tokens N and/or --cost X".to_string(),
        ));
    }
    let r = Raise {
        time: clock::iso_now(),
        target: target.to_string(),
        period: period_of(budget.per, clock::now()),
        tokens,
        cost_usd,
    };
    let dir = project.telemetry_dir();
    fsx::ensure_dirs(&[&dir]).map_err(|e| Error::io(&dir, e))?;
    let mut line = serde_json::to_string(&r).map_err(|e| Error::internal(format!("raise: {e}")))?;
    line.push('\n');
    let path = raises_file(project);
    fsx::append(&path, line.as_bytes()).map_err(|e| Error::io(&path, e))?;
    Ok(r)
}

/// The `swarm budget` text: one line per budget.
pub fn text(b: &Budgets) -> String {
    if b.budgets.is_empty() {
        return "no budgets set (see `budget:` in docs/cost.md)\n".into();
    }
    let mut out = String::new();
    for s in &b.budgets {
        let whose = if s.budget_of == SWARM {
            "swarm (all)".to_string()
        } else {
            s.budget_of.clone()
        };
        let mut limits = Vec::new();
        if let Some(t) = s.budget.tokens {
            let mut l = format!("{} of {t} tokens", s.used.total_tokens);
            if s.raised_tokens > 0 {
                l.push_str(&format!(" (+{} raised)", s.raised_tokens));
            }
            limits.push(l);
        }
        if let Some(c) = s.budget.cost {
            let mut l = format!("{} of {}", cost::dollars(s.used.cost_usd), cost::dollars(c));
            if s.raised_cost_usd > 0.0 {
                l.push_str(&format!(" (+{} raised)", cost::dollars(s.raised_cost_usd)));
            }
            limits.push(l);
        }
        let period = match s.budget.per {
            BudgetPeriod::Day => format!("per day, {}", s.period),
            BudgetPeriod::Swarm => "per swarm".into(),
        };
        out.push_str(&format!(
            "{whose:<16} {:<8} {} ({period})",
            if s.reached.is_some() { "PARKED" } else { "ok" },
            limits.join(", ")
        ));
        if let Some(r) = &s.reached {
            out.push_str(&format!("  -> {}", r.handle()));
        }
        out.push('\n');
    }
    if b.skipped_lines > 0 {
        out.push_str(&format!(
            "skipped {} unreadable lines of the usage journal or the raises file\n",
            b.skipped_lines
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: &str, time: &str, tokens: u64) -> Usage {
        Usage {
            time: time.into(),
            role: role.into(),
            source: "api".into(),
            input_tokens: tokens,
            ..Usage::default()
        }
    }

    #[test]
    fn a_role_is_parked_at_its_limit_or_the_swarms_and_raises_count_in_their_period() {
        let c = Config::parse(
            "budget: {tokens: 100, per: swarm}\nroles:\n  - {name: a, budget: {tokens: 10}}\n  - {name: b}\n",
        )
        .unwrap();
        let now = clock::parse("2026-12-02T12:00:00Z").unwrap();
        let recs = vec![
            turn("a", "2026-12-01T12:00:00Z", 50),
            turn("a", "2026-12-02T01:00:00Z", 9),
        ];
        let b = Budgets {
            budgets: standings(&c, &recs, &[], now),
            skipped_lines: 0,
        };
        assert_eq!(b.parked("a"), None, "yesterday's turn does not count");
        let mut recs2 = recs.clone();
        recs2.push(turn("a", "2026-12-02T02:00:00Z", 1));
        let b = Budgets {
            budgets: standings(&c, &recs2, &[], now),
            skipped_lines: 0,
        };
        let r = b.parked("a").unwrap();
        assert_eq!((r.used_tokens, r.limit_tokens), (10, Some(10)));
        assert!(r.words().contains("10 of 10 tokens"), "{}", r.words());
        assert_eq!(b.parked("b"), None);
        let raise = Raise {
            target: "a".into(),
            period: "2026-12-02".into(),
            tokens: 5,
            ..Raise::default()
        };
        let stale = Raise {
            period: "2026-12-01".into(),
            ..raise.clone()
        };
        let b = Budgets {
            budgets: standings(&c, &recs2, &[stale], now),
            skipped_lines: 0,
        };
        assert!(b.parked("a").is_some(), "yesterday's raise does not count");
        let b = Budgets {
            budgets: standings(&c, &recs2, &[raise], now),
            skipped_lines: 0,
        };
        assert_eq!(b.parked("a"), None);
        recs2.push(turn("b", "2026-12-02T03:00:00Z", 40));
        let b = Budgets {
            budgets: standings(&c, &recs2, &[], now),
            skipped_lines: 0,
        };
        assert_eq!(b.parked("b").unwrap().budget_of, SWARM);
    }
}
