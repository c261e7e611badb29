//! What the agents' turns cost: the usage journal summed per role, item,
//! thread or day (docs/cost.md). A turn's cost is the CLI's own figure when
//! it reported one, else its tokens priced by `prices:` in swarm.yaml; a
//! turn whose model has no price counts its tokens and is marked unpriced,
//! never guessed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::protocol::clock::{self, Instant};
use crate::protocol::config::{Config, Price};
use crate::protocol::layout::Project;
use crate::protocol::swarm::Swarm;
use crate::telemetry::usage::{self, Usage};

/// What the rows are keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    #[default]
    Role,
    Item,
    Thread,
    Day,
}

impl By {
    pub fn as_str(self) -> &'static str {
        match self {
            By::Role => "role",
            By::Item => "item",
            By::Thread => "thread",
            By::Day => "day",
        }
    }

    fn key(self, u: &Usage) -> String {
        match self {
            By::Role => u.role.clone(),
            By::Item => u.id.clone().unwrap_or_else(|| "-".into()),
            By::Thread => u.thread.clone().unwrap_or_else(|| "-".into()),
            By::Day => day_of(u).unwrap_or_else(|| "-".into()),
        }
    }
}

/// The UTC day (`2026-12-02`) of a record's time, when it has one.
pub fn day_of(u: &Usage) -> Option<String> {
    clock::parse(&u.time).map(|t| t.format("%Y-%m-%d").to_string())
}

/// The price that applies to `model`: its own entry, else the longest
/// entry the model's name starts with (`claude-sonnet-4-5` prices
/// `claude-sonnet-4-5-20250929`).
pub fn price_for<'a>(config: &'a Config, model: &str) -> Option<&'a Price> {
    config.prices.get(model).or_else(|| {
        config
            .prices
            .iter()
            .filter(|(k, _)| model.starts_with(k.as_str()))
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| p)
    })
}

/// A turn's cost in US dollars: the reported figure, else the priced
/// tokens; None when neither is known.
pub fn cost_of(config: &Config, u: &Usage) -> Option<f64> {
    if let Some(c) = u.cost_usd.filter(|c| c.is_finite() && *c >= 0.0) {
        return Some(c);
    }
    let p = price_for(config, u.model.as_deref()?)?;
    let per = |n: u64, price: f64| n as f64 * price / 1_000_000.0;
    Some(
        per(u.input_tokens, p.input)
            + per(u.output_tokens, p.output)
            + per(u.cache_read_tokens, p.cache_read)
            + per(u.cache_write_tokens, p.cache_write),
    )
}

/// Sums over a set of turns.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Tally {
    pub turns: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub total_tokens: u64,
    /// US dollars, over the turns whose cost is known.
    pub cost_usd: f64,
    /// Turns with neither a reported cost nor a price for their model.
    pub unpriced_turns: u64,
    /// Turns whose figures could not be read (`lost` records): their
    /// tokens and cost are missing from the sums.
    pub unread_turns: u64,
}

impl Tally {
    pub fn add(&mut self, config: &Config, u: &Usage) {
        self.turns += 1;
        if u.lost.is_some() {
            self.unread_turns += 1;
            return;
        }
        self.input_tokens = self.input_tokens.saturating_add(u.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(u.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(u.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(u.cache_write_tokens);
        self.total_tokens = self.total_tokens.saturating_add(u.total_tokens());
        match cost_of(config, u) {
            Some(c) => self.cost_usd += c,
            None => self.unpriced_turns += 1,
        }
    }

    /// `12,345 tokens, $0.0123` (`+ 2 unpriced turns` when some are).
    pub fn words(&self) -> String {
        let mut s = format!("{} tokens, {}", self.total_tokens, dollars(self.cost_usd));
        if self.unpriced_turns > 0 {
            s.push_str(&format!(" (+{} unpriced turns)", self.unpriced_turns));
        }
        if self.unread_turns > 0 {
            s.push_str(&format!(" (+{} turns not read)", self.unread_turns));
        }
        s
    }
}

/// `$1.2345`: four decimals, as per-turn costs are often fractions of a cent.
pub fn dollars(v: f64) -> String {
    format!("${v:.4}")
}

/// One row of `swarm cost`.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub key: String,
    #[serde(flatten)]
    pub tally: Tally,
}

/// `swarm cost`: the rows, their total, and how many journal lines were
/// unreadable.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub by: By,
    pub since: Option<String>,
    pub rows: Vec<Row>,
    pub total: Tally,
    pub skipped_lines: usize,
}

/// The journal's records at or after `since`, with the config that prices
/// them and the count of skipped lines.
pub fn load(project: &Project) -> Result<(Config, Vec<Usage>, usize)> {
    let swarm = Swarm::new(project.clone());
    let (config, records, skipped) = load_in(&swarm)?;
    Ok((config.clone(), records, skipped))
}

/// [`load`] in a loaded swarm.
pub fn load_in(swarm: &Swarm) -> Result<(&Config, Vec<Usage>, usize)> {
    let config = swarm.config()?;
    let (records, skipped) = usage::read(&swarm.project)?;
    Ok((config, records, skipped))
}

/// Whether a record falls at or after `since` (a record without a readable
/// time is counted only when there is no `since`).
pub fn within(u: &Usage, since: Option<Instant>) -> bool {
    match since {
        None => true,
        Some(s) => clock::parse(&u.time).is_some_and(|t| t >= s),
    }
}

/// Sums `records` by `by`; rows in key order.
pub fn summarize(config: &Config, records: &[Usage], by: By, since: Option<Instant>) -> Report {
    let mut rows: BTreeMap<String, Tally> = BTreeMap::new();
    let mut total = Tally::default();
    for u in records.iter().filter(|u| within(u, since)) {
        rows.entry(by.key(u)).or_default().add(config, u);
        total.add(config, u);
    }
    Report {
        by,
        since: since.map(clock::iso),
        rows: rows
            .into_iter()
            .map(|(key, tally)| Row { key, tally })
            .collect(),
        total,
        skipped_lines: 0,
    }
}

/// [`summarize`] on the project's journal.
pub fn report(project: &Project, by: By, since: Option<Instant>) -> Result<Report> {
    let (config, records, skipped) = load(project)?;
    let mut r = summarize(&config, &records, by, since);
    r.skipped_lines = skipped;
    Ok(r)
}

/// `--since T`: an RFC 3339 time, a UTC day (`2026-12-01`), or a duration
/// back from now (`2h`, `30m`, `7d`).
pub fn parse_since(s: &str, now: Instant) -> Result<Instant> {
    if let Some(t) = clock::parse(s) {
        return Ok(t);
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        if let Some(t) = d.and_hms_opt(0, 0, 0) {
            return Ok(t.and_utc());
        }
    }
    let back = crate::protocol::duration::parse(s).map_err(|_| {
        Error::bad_input(format!(
            "--since: '{}' is neither a time (2026-12-01T08:00:00Z), a day (2026-12-01) nor a duration (2h, 7d)",
            crate::text::escape(s)
        ))
    })?;
    let back = chrono::Duration::from_std(back).unwrap_or(chrono::Duration::MAX);
    Ok(now
        .checked_sub_signed(back)
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC))
}

/// The table `swarm cost` prints.
pub fn text(r: &Report) -> String {
    let mut out = format!(
        "{:<40} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}\n",
        r.by.as_str().to_uppercase(),
        "TURNS",
        "INPUT",
        "OUTPUT",
        "CACHE_READ",
        "CACHE_WRITE",
        "COST_USD"
    );
    let line = |key: &str, t: &Tally| {
        format!(
            "{:<40} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}{}\n",
            crate::text::escape(key),
            t.turns,
            t.input_tokens,
            t.output_tokens,
            t.cache_read_tokens,
            t.cache_write_tokens,
            format!("{:.4}", t.cost_usd),
            [(t.unpriced_turns, "unpriced"), (t.unread_turns, "not read")]
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, what)| format!("  ({n} {what})"))
                .collect::<String>()
        )
    };
    for row in &r.rows {
        out.push_str(&line(&row.key, &row.tally));
    }
    out.push_str(&line("TOTAL", &r.total));
    if r.total.unpriced_turns > 0 {
        out.push_str("unpriced: those turns' models have no entry in `prices:` in swarm.yaml and their CLI reported no cost (docs/cost.md)\n");
    }
    if r.total.unread_turns > 0 {
        out.push_str("not read: those turns ended but their figures could not be read (events.jsonl has each `activity_lost` with the reason); the sums miss them (docs/cost.md)\n");
    }
    if r.skipped_lines > 0 {
        out.push_str(&format!(
            "skipped {} unreadable lines of .swarmforge/telemetry/usage.jsonl\n",
            r.skipped_lines
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: &str, model: &str, inp: u64, out: u64, cost: Option<f64>) -> Usage {
        Usage {
            time: "2026-12-02T01:00:00Z".into(),
            role: role.into(),
            model: Some(model.into()),
            source: "api".into(),
            input_tokens: inp,
            output_tokens: out,
            cost_usd: cost,
            ..Usage::default()
        }
    }

    #[test]
    fn reported_cost_wins_prices_apply_by_longest_prefix_and_unpriced_is_counted() {
        let c = Config::parse(
            "prices:\n  m: {input: 1, output: 2}\n  m-large: {input: 10, output: 20}\n",
        )
        .unwrap();
        let recs = vec![
            turn("a", "m-large-2025", 1_000_000, 1_000_000, None),
            turn("a", "m", 500_000, 0, Some(7.0)),
            turn("b", "other", 10, 10, None),
        ];
        let r = summarize(&c, &recs, By::Role, None);
        assert_eq!(r.rows.len(), 2);
        assert_eq!(r.rows[0].tally.cost_usd, 37.0);
        assert_eq!(r.rows[1].tally.unpriced_turns, 1);
        assert_eq!(r.total.total_tokens, 2_500_020);
        let later = clock::parse("2026-12-02T02:00:00Z").unwrap();
        assert_eq!(summarize(&c, &recs, By::Day, Some(later)).total.turns, 0);
        assert_eq!(
            summarize(&c, &recs, By::Day, None).rows[0].key,
            "2026-12-02"
        );
    }

    #[test]
    fn since_takes_a_time_a_day_or_a_duration() {
        let now = clock::parse("2026-12-02T10:00:00Z").unwrap();
        assert_eq!(
            parse_since("2h", now).unwrap(),
            clock::parse("2026-12-02T08:00:00Z").unwrap()
        );
        assert_eq!(
            parse_since("1d", now).unwrap(),
            clock::parse("2026-12-01T10:00:00Z").unwrap()
        );
        assert_eq!(
            parse_since("2026-11-30", now).unwrap(),
            clock::parse("2026-11-30T00:00:00Z").unwrap()
        );
        assert!(parse_since("yesterday", now).is_err());
    }
}
