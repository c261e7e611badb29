//! What a model call costs: its usage journaled as a headless turn's is
//! (docs/cost.md), and the budget that parks the role before another call.
//! The invariant: a usage that cannot be journaled is said, never fatal
//! (the answer still goes out).

use crate::agent::place;
use crate::error::Error;
use crate::protocol::header::Message;

use super::{chat, one_line_err, Runner};

impl Runner {
    /// One call's usage, journaled as a headless turn's is (docs/cost.md):
    /// attributed to the item in process and its thread. A journal that
    /// cannot be written is said, never fatal: the answer still goes out.
    pub(super) fn record_usage(
        &self,
        about: Option<&Message>,
        s: chat::Spent,
        asked: &str,
        say: &mut dyn FnMut(&str),
    ) {
        let mut u = crate::telemetry::usage::Usage::now(&self.role, "api");
        u.started = Some(asked.to_string());
        u.id = about.and_then(Message::id).map(str::to_string);
        u.thread = about
            .and_then(|m| m.thread().or(m.id()))
            .map(str::to_string);
        u.model = s.model.or_else(|| Some(self.endpoint.model.clone()));
        u.input_tokens = s.input_tokens;
        u.output_tokens = s.output_tokens;
        u.cache_read_tokens = s.cache_read_tokens;
        u.cost_usd = s.cost_usd;
        let recorded = place::resolve_as(&self.cwd, &self.role)
            .ok()
            .and_then(|at| at.project().cloned())
            .ok_or_else(|| Error::not_found("no project"))
            .and_then(|p| crate::telemetry::usage::record(&p, &u));
        if let Err(e) = recorded {
            say(&format!(
                "{}: usage not journaled: {}",
                self.role,
                one_line_err(&e)
            ));
        }
    }

    /// Why this role may not start another call (docs/cost.md, "Budgets").
    pub(super) fn parked(&self) -> Option<crate::telemetry::budget::Reason> {
        let at = place::resolve_as(&self.cwd, &self.role).ok()?;
        crate::telemetry::budget::parked(at.project()?, &self.role)
    }
}
