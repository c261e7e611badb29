//! The lines of one turn end's part of a transcript, turned into the
//! records a headless turn's stream gives: Claude Code's lines by the
//! stream's parser (agents/stream.rs), Codex's and Gemini CLI's by
//! agents/recording.rs.
//!
//! Invariant kept here: **what a line says is counted once and bounded**:
//! a line not a JSON object is skipped and counted, a line type not known
//! is counted (its first few types named), every text kept is bounded
//! (`activity::bound`), and a message's usage or an event carrying a key
//! is taken only the first time its key is seen ([`Place::first_time`]).

use serde_json::Value;

use super::cursor::Place;
use super::Cli;
use crate::launch::agents::stream::{self, Event, Figures};
use crate::protocol::clock;
use crate::telemetry::activity::{self, Activity};

/// One turn end's reading.
pub(super) struct Reader<'a> {
    pub(super) role: &'a str,
    pub(super) cli: Cli,
    /// Lines of a type this reader does not know, and the first few types.
    pub(super) unknown: usize,
    pub(super) unknown_types: Vec<String>,
    /// What the agent did, in order.
    pub(super) records: Vec<Activity>,
    /// The time of the first line read (the turn's start).
    pub(super) first: Option<String>,
    pub(super) session: Option<String>,
    pub(super) model: Option<String>,
    /// The usage of the messages read, summed.
    pub(super) figures: Figures,
    /// Whether any usage was read.
    pub(super) used: bool,
    /// Lines skipped (too long, not UTF-8, not JSON).
    pub(super) skipped: usize,
}

/// A transcript's time stamp, if it is one.
fn time_of(v: &Value) -> Option<String> {
    let t = v["timestamp"].as_str().filter(|t| t.len() <= 64)?;
    clock::parse(t).map(clock::iso)
}

impl<'a> Reader<'a> {
    /// A reader of `role`'s transcript of `cli`, nothing read yet.
    pub(super) fn new(role: &'a str, cli: Cli) -> Reader<'a> {
        Reader {
            role,
            cli,
            unknown: 0,
            unknown_types: Vec::new(),
            records: Vec::new(),
            first: None,
            session: None,
            model: None,
            figures: Figures::default(),
            used: false,
            skipped: 0,
        }
    }

    /// One whole line (at most `MAX_LINE` bytes) read at `place`.
    pub(super) fn line(&mut self, bytes: &[u8], place: &mut Place) {
        let Some(v) = std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(s.trim_end()).ok())
            .filter(Value::is_object)
        else {
            self.skipped += 1;
            return;
        };
        if self.cli != Cli::Claude {
            return self.recorded(&v, place);
        }
        let ty = v["type"].as_str().unwrap_or("");
        // Summaries, file snapshots, system notes: not what the agent did.
        if ty != "assistant" && ty != "user" {
            return;
        }
        let time = time_of(&v);
        if self.first.is_none() {
            self.first = time.clone();
        }
        if let Some(id) = v["sessionId"].as_str() {
            self.session = Some(activity::bound(id));
        }
        let m = &v["message"];
        if ty == "assistant" {
            if let Some(model) = m["model"].as_str().filter(|m| !m.starts_with('<')) {
                self.model = Some(activity::bound(model));
            }
            self.count_usage(m, place);
        }
        for ev in stream::parse(Cli::Claude, &v) {
            if let Event::Activity {
                kind,
                name,
                text,
                status,
            } = ev
            {
                let mut a = stream::record(self.role, kind, name, text, status);
                if let Some(t) = &time {
                    a.time = t.clone();
                }
                self.records.push(a);
            }
        }
    }

    /// A line of Codex's rollout or Gemini CLI's recording.
    fn recorded(&mut self, v: &Value, place: &mut Place) {
        let time = time_of(v);
        for (key, ev) in crate::launch::agents::recording::parse(self.cli, v) {
            if key.is_some_and(|k| !place.first_time(activity::bound(&k))) {
                continue;
            }
            match ev {
                Event::Session(id) => self.session = Some(activity::bound(&id)),
                Event::Model(m) => self.model = Some(activity::bound(&m)),
                Event::Activity {
                    kind,
                    name,
                    text,
                    status,
                } => {
                    if self.first.is_none() {
                        self.first = time.clone();
                    }
                    let mut a = stream::record(self.role, kind, name, text, status);
                    if let Some(t) = &time {
                        a.time = t.clone();
                    }
                    self.records.push(a);
                }
                Event::Usage(f) => {
                    if self.first.is_none() {
                        self.first = time.clone();
                    }
                    let t = &mut self.figures;
                    t.input_tokens = t.input_tokens.saturating_add(f.input_tokens);
                    t.output_tokens = t.output_tokens.saturating_add(f.output_tokens);
                    t.cache_read_tokens = t.cache_read_tokens.saturating_add(f.cache_read_tokens);
                    t.cache_write_tokens =
                        t.cache_write_tokens.saturating_add(f.cache_write_tokens);
                    self.used = true;
                }
                Event::Unknown(t) => {
                    self.unknown += 1;
                    stream::name_unknown(&mut self.unknown_types, &t);
                }
            }
        }
    }

    /// Adds a message's usage once per message id.
    fn count_usage(&mut self, m: &Value, place: &mut Place) {
        let u = &m["usage"];
        if !u.is_object() {
            return;
        }
        if m["id"]
            .as_str()
            .is_some_and(|id| !place.first_time(activity::bound(id)))
        {
            return;
        }
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        let f = &mut self.figures;
        f.input_tokens = f.input_tokens.saturating_add(n("input_tokens"));
        f.output_tokens = f.output_tokens.saturating_add(n("output_tokens"));
        f.cache_read_tokens = f
            .cache_read_tokens
            .saturating_add(n("cache_read_input_tokens"));
        f.cache_write_tokens = f
            .cache_write_tokens
            .saturating_add(n("cache_creation_input_tokens"));
        self.used = true;
    }
}
