//! What agents' turns cost (docs/cost.md): `prices:`, `budget:` (the
//! project's and each role's) and `otel:` (where traces go).
//!
//! Invariant: amounts are finite and not negative, model names bounded,
//! the trace endpoint an http(s) URL.

use serde::{Deserialize, Serialize};

use super::{Config, ConfigProblem};
use crate::text;

/// One model's price (`prices.<model>` in swarm.yaml): US dollars per
/// million tokens of each kind.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

/// Over what a budget counts.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum BudgetPeriod {
    /// The UTC day: a new day starts from zero.
    #[default]
    Day,
    /// The swarm's whole life.
    Swarm,
}

impl BudgetPeriod {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetPeriod::Day => "day",
            BudgetPeriod::Swarm => "swarm",
        }
    }
}

/// `budget: {tokens: N, cost: X, per: day|swarm}`: a role (or the whole
/// swarm) is parked once either limit is reached (docs/cost.md).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    pub tokens: Option<u64>,
    /// US dollars.
    pub cost: Option<f64>,
    pub per: BudgetPeriod,
}

/// `otel:`: where the daemon sends traces (OTLP over HTTP).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct OtelConfig {
    /// The collector's base URL, e.g. `http://127.0.0.1:4318`
    /// (`/v1/traces` is appended); unset: no export.
    pub endpoint: Option<String>,
}

/// Longest model name in `prices:`.
const MAX_MODEL_NAME: usize = 200;

impl Config {
    /// Prices, budgets and the trace endpoint (docs/cost.md).
    pub(super) fn check_spending(&self) -> std::result::Result<(), ConfigProblem> {
        let esc = text::escape;
        let amount = |key: String, value: f64| {
            if value.is_finite() && value >= 0.0 {
                Ok(())
            } else {
                Err(ConfigProblem::Amount { key, value })
            }
        };
        for (model, p) in &self.prices {
            if model.is_empty()
                || model.len() > MAX_MODEL_NAME
                || model.chars().any(|c| c.is_control())
            {
                return Err(ConfigProblem::ModelName(model.clone()));
            }
            for (k, v) in [
                ("input", p.input),
                ("output", p.output),
                ("cache_read", p.cache_read),
                ("cache_write", p.cache_write),
            ] {
                amount(format!("prices.{}.{k}", esc(model)), v)?;
            }
        }
        let budget = |key: String, b: &Budget| {
            if b.tokens.is_none() && b.cost.is_none() {
                return Err(ConfigProblem::EmptyBudget { key });
            }
            if let Some(c) = b.cost {
                amount(format!("{key}.cost"), c)?;
            }
            Ok(())
        };
        if let Some(b) = &self.budget {
            budget("budget".into(), b)?;
        }
        for r in &self.roles {
            if let Some(b) = &r.budget {
                budget(format!("roles[{}].budget", esc(&r.name)), b)?;
            }
        }
        if let Some(e) = &self.otel.endpoint {
            let host = e
                .strip_prefix("http://")
                .or_else(|| e.strip_prefix("https://"))
                .map(|r| r.split('/').next().unwrap_or(""));
            if host.is_none_or(|h| h.is_empty() || h.contains('@'))
                || e.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                return Err(ConfigProblem::OtelEndpoint(e.clone()));
            }
        }
        Ok(())
    }
}
