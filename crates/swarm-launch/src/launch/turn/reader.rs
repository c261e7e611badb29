//! The reader of a headless turn's stream: each line, parsed by the
//! CLI's stream parser (agents/stream.rs), becomes the role's session,
//! activity and usage records; a refused request the CLI retries marks
//! the role `blocked` until the model gets on.
//!
//! Invariant kept here: **nothing a line holds stops the reading or
//! corrupts a file**: a line longer than [`MAX_LINE`], not UTF-8 or not a
//! JSON object is counted as skipped, an event of a type not known is
//! counted (its first few types named), and each record is one bounded
//! append, attributed to the item in process when it was made (it stays
//! attributed after `done` moved the item on).

use std::io::Read;

use serde_json::Value;

use super::run::{Run, STDERR_TAIL};
use super::MAX_LINE;
use crate::launch::agent_session;
use crate::launch::agents::stream::{self, Event, Figures};
use crate::launch::agents::Cli;
use crate::launch::plan::PlannedRole;
use crate::protocol::layout::{Project, Worktree};
use crate::telemetry::activity::{self, Activity, Kind};
use crate::telemetry::usage;

/// What the reader keeps while a turn runs.
pub(super) struct Reader<'a> {
    project: &'a Project,
    pub(super) role: &'a str,
    cli: Cli,
    wt: Worktree,
    /// `limits.max_file_bytes`, for reading the item in process.
    max_bytes: u64,
    /// The handoff worked on: the latest seen in process during the turn
    /// (it stays attributed after `done` moved it on).
    item: Option<(String, String)>,
    model: Option<String>,
    session: Option<String>,
    pub(super) run: Run,
    pub(super) unknown_types: Vec<String>,
    /// The time of this run's `turn_start` record.
    started: Option<String>,
    /// Items moved into process during the turn, seen as it happens (the
    /// reader may read behind the agent; launch::turn_item).
    items: Option<crate::launch::turn_item::ItemWatch>,
    /// The CLI retries a request the model refused (a 401, 403 or 429):
    /// the role is `blocked` (daemon/pane.rs's marker) until it gets on.
    /// Also when an earlier turn left the mark, so this one's first
    /// activity clears it.
    blocked: bool,
    /// The CLI gave up on the refused request (the turn ends on it): the
    /// mark stays after the turn, until a later one gets on.
    pub(super) gave_up: bool,
}

impl<'a> Reader<'a> {
    /// The reader of a run for `r` that `resume`s a session (None: a new
    /// conversation), its turn start made at `started`.
    pub(super) fn new(
        project: &'a Project,
        r: &'a PlannedRole,
        cli: Cli,
        resume: Option<&str>,
        max_bytes: u64,
        started: String,
    ) -> Reader<'a> {
        let role = r.name.as_str();
        Reader {
            project,
            role,
            cli,
            wt: r.worktree(),
            max_bytes,
            item: crate::launch::turn_item::current_item(&r.worktree(), max_bytes),
            model: None,
            session: resume.map(str::to_string),
            run: Run::default(),
            unknown_types: Vec::new(),
            started: Some(started),
            items: Some(crate::launch::turn_item::ItemWatch::start(
                &r.worktree(),
                max_bytes,
            )),
            blocked: matches!(
                crate::daemon::pane::reported(project, role),
                Some((crate::daemon::pane::Wait::Blocked, ..))
            ),
            gave_up: false,
        }
    }

    /// The item in process now, or the last one seen moving into process,
    /// becomes the one this turn works on.
    pub(super) fn look_at_item(&mut self) {
        if let Some(it) = crate::launch::turn_item::current_item(&self.wt, self.max_bytes)
            .or_else(|| self.items.as_ref().and_then(|w| w.last()))
        {
            self.item = Some(it);
        }
    }

    /// Appends `a` to the role's activity, attributed to the item worked on.
    pub(super) fn record(&self, mut a: Activity) {
        a.id = self.item.as_ref().map(|(id, _)| id.clone());
        if let Err(e) = activity::append(self.project, &a) {
            eprintln!("warning: {e}");
        }
    }

    /// One line of the stream (at most [`MAX_LINE`] bytes).
    fn line(&mut self, bytes: &[u8]) {
        let Some(v) = std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(s.trim_end()).ok())
            .filter(Value::is_object)
        else {
            self.run.skipped += 1;
            return;
        };
        let refused = stream::retry(self.cli, &v).filter(stream::Retry::blocks);
        if let Some(r) = &refused {
            self.block(r);
        }
        for ev in stream::parse(self.cli, &v) {
            // The model got on; not the refusal's own line (Codex's error
            // lines are also the turn's activity).
            if refused.is_none() && matches!(ev, Event::Activity { .. } | Event::Usage(_)) {
                self.unblock();
            }
            self.event(ev);
        }
    }

    /// The CLI retries a refused request: `blocked` from the first retry
    /// (`swarm status`, the journal, `notify.command`), not once its
    /// retries are spent (about three minutes for Claude Code); the line
    /// also goes to the agent's log, or its pane for a headless role of a
    /// tmux swarm.
    fn block(&mut self, r: &stream::Retry) {
        // The pane of a headless role in a tmux swarm shows this line, and
        // the daemon reads the same text from it as the marker's (pane.rs).
        let text = format!("{} API error {} {}", self.cli.name(), r.status, r.error);
        match r.max {
            0 => eprintln!("{text} · the CLI gave up"),
            max => eprintln!("{text} · retrying, attempt {}/{max}", r.attempt),
        }
        let p = crate::daemon::pane::Prompt {
            wait: crate::daemon::pane::Wait::Blocked,
            text: crate::text::escape(&text),
            options: Vec::new(),
        };
        crate::daemon::pane::report_outside(self.project, self.role, Some(&p));
        self.blocked = true;
        self.gave_up = r.max == 0;
    }

    /// The model got on: the `blocked` mark, if any, goes.
    pub(super) fn unblock(&mut self) {
        if std::mem::take(&mut self.blocked) {
            crate::daemon::pane::report_outside(self.project, self.role, None);
        }
    }

    fn event(&mut self, ev: Event) {
        match ev {
            Event::Session(id) => {
                if self.session.as_deref() == Some(id.as_str()) {
                    return;
                }
                match agent_session::write(self.project, self.role, self.cli, &id) {
                    Ok(()) => self.session = Some(id),
                    Err(e) => {
                        self.record(Activity::now(self.role, Kind::Note).text(&e.to_string()))
                    }
                }
            }
            Event::Model(m) => self.model = Some(m),
            Event::Activity {
                kind,
                name,
                text,
                status,
            } => {
                if kind == Kind::Error {
                    if let Some(t) = text
                        .as_deref()
                        .filter(|_| self.run.errors.len() < STDERR_TAIL)
                    {
                        self.run.errors.push_str(&activity::bound(t));
                        self.run.errors.push('\n');
                    }
                } else {
                    self.run.acted += 1;
                }
                if matches!(kind, Kind::ToolCall | Kind::ToolResult) {
                    self.look_at_item();
                }
                self.record(stream::record(self.role, kind, name, text, status));
            }
            Event::Usage(f) => {
                self.look_at_item();
                self.usage(f);
            }
            Event::Unknown(t) => {
                self.run.unknown += 1;
                stream::name_unknown(&mut self.unknown_types, &t);
            }
        }
    }

    /// The usage a CLI reported: this turn's part, journalled and recorded.
    fn usage(&self, f: Figures) {
        let f = super::totals::this_turn(
            self.project,
            self.role,
            self.cli,
            self.session.as_deref(),
            f,
        );
        if f.input_tokens + f.output_tokens + f.cache_read_tokens + f.cache_write_tokens == 0
            && f.cost_usd.is_none_or(|c| c == 0.0)
        {
            // A run that never reached the model (a refused resume) used nothing.
            return;
        }
        let mut u = stream::usage_of(
            self.role,
            self.cli,
            f,
            self.model.clone(),
            self.item.as_ref(),
        );
        u.started = self.started.clone();
        if let Err(e) = usage::record(self.project, &u) {
            eprintln!("warning: {e}");
        }
        self.record(usage::activity(&u));
    }
}

/// Reads `from` line by line, each at most [`MAX_LINE`] bytes; the rest
/// of a longer line is read and dropped in pieces (never held), and the
/// line counted as skipped.
pub(super) fn read_lines(from: impl Read, reader: &mut Reader) {
    crate::launch::acp::rpc::each_line(from, MAX_LINE, |line| {
        match line {
            Some(b) => reader.line(b),
            None => reader.run.skipped += 1,
        }
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(p: &Project) -> Reader<'_> {
        Reader {
            project: p,
            role: "r",
            cli: Cli::Claude,
            wt: Worktree::new(p.root.join("wt")),
            max_bytes: 1024 * 1024,
            item: None,
            model: None,
            session: None,
            run: Run::default(),
            unknown_types: Vec::new(),
            items: None,
            started: None,
            blocked: false,
            gave_up: false,
        }
    }

    #[test]
    fn a_retry_line_reads_as_its_marker_in_a_pane() {
        let pane = "claude API error 401 authentication_failed · retrying, attempt 3/10\n";
        let p = crate::daemon::pane::classify(pane).unwrap();
        assert_eq!(p.text, "claude API error 401 authentication_failed");
    }

    #[test]
    fn a_refused_request_the_cli_retries_blocks_the_role_until_the_turn_gets_on() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path());
        std::fs::create_dir_all(p.daemon_dir()).unwrap();
        let mut r = reader(&p);
        // Claude Code 2.1.332 `-p --output-format stream-json --verbose`
        // answered 401 by the model.
        r.line(br#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1093,"error_status":401,"error":"authentication_failed","session_id":"s1","uuid":"u"}"#);
        let (wait, _, text) = crate::daemon::pane::reported(&p, "r").unwrap();
        assert_eq!(wait, crate::daemon::pane::Wait::Blocked);
        assert_eq!(text, "claude API error 401 authentication_failed");
        // A server error is retried and heals: not blocked.
        let mut other = reader(&p);
        crate::daemon::pane::report_outside(&p, "r", None);
        other.line(br#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error_status":529,"error":"overloaded"}"#);
        assert!(crate::daemon::pane::reported(&p, "r").is_none());
        // The retry succeeds: the model's answer unblocks.
        r.line(br#"{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"error_status":429,"error":"rate_limit"}"#);
        assert!(crate::daemon::pane::reported(&p, "r").is_some());
        r.line(br#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]},"session_id":"s1"}"#);
        assert!(crate::daemon::pane::reported(&p, "r").is_none());
    }

    /// Codex 0.171 and Gemini CLI 0.61 answered 401 by the model, as their
    /// streams say it (seen against a server answering 401 to everything).
    #[test]
    fn codex_and_gemini_cli_refused_requests_block_the_role() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path());
        std::fs::create_dir_all(p.daemon_dir()).unwrap();
        let lines: [(Cli, &[u8], &str); 4] = [
            (
                Cli::Codex,
                br#"{"type":"error","message":"Reconnecting... 1/5 (unexpected status 401 Unauthorized: token revoked, url: http://127.0.0.1:1/v1/responses)"}"#,
                "codex API error 401 Unauthorized",
            ),
            (
                Cli::Codex,
                br#"{"type":"turn.failed","error":{"message":"unexpected status 403 Forbidden: no, url: http://127.0.0.1:1/v1/responses"}}"#,
                "codex API error 403 Forbidden",
            ),
            (
                Cli::Gemini,
                br#"{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":401,\"message\":\"API key not valid.\",\"status\":\"UNAUTHENTICATED\"}}]"}}"#,
                "gemini API error 401 UNAUTHENTICATED",
            ),
            (
                Cli::Gemini,
                br#"{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"message\":\"quota\",\"status\":\"RESOURCE_EXHAUSTED\"}}]"}}"#,
                "gemini API error 429 RESOURCE_EXHAUSTED",
            ),
        ];
        for (cli, line, said) in lines {
            crate::daemon::pane::report_outside(&p, "r", None);
            let mut r = reader(&p);
            r.cli = cli;
            r.line(line);
            let (wait, _, text) = crate::daemon::pane::reported(&p, "r")
                .unwrap_or_else(|| panic!("not blocked: {}", String::from_utf8_lossy(line)));
            assert_eq!(
                (wait, text.as_str()),
                (crate::daemon::pane::Wait::Blocked, said)
            );
        }
        // A server error or a failure without a status blocks nothing.
        for (cli, line) in [
            (Cli::Codex, &br#"{"type":"error","message":"Reconnecting... 2/5 (unexpected status 500 Internal Server Error: x)"}"#[..]),
            (Cli::Codex, br#"{"type":"error","message":"stream disconnected"}"#),
            (Cli::Gemini, br#"{"type":"result","status":"error","error":{"message":"[API Error: not json]"}}"#),
        ] {
            crate::daemon::pane::report_outside(&p, "r", None);
            let mut r = reader(&p);
            r.cli = cli;
            r.line(line);
            assert!(crate::daemon::pane::reported(&p, "r").is_none());
        }
    }

    #[test]
    fn bad_lines_are_bounded_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path());
        std::fs::create_dir_all(p.swarmforge()).unwrap();
        let mut input = Vec::new();
        input.extend_from_slice(
            b"{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s1\"}\n",
        );
        input.extend_from_slice(b"not json\n");
        input.extend_from_slice(b"\xff\xfe{}\n");
        input.extend(std::iter::repeat_n(b'x', MAX_LINE * 3));
        input.push(b'\n');
        input.extend_from_slice(b"{\"type\":\"new-thing\"}\n");
        input.extend_from_slice(b"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n");
        input.extend_from_slice(b"{\"type\":\"system\",\"session_id\":\"$(rm -rf /)\"}\n");
        // An endless last line (no newline before EOF).
        input.extend(std::iter::repeat_n(b'y', MAX_LINE * 2));
        let mut rd = reader(&p);
        read_lines(&input[..], &mut rd);
        assert_eq!(rd.run.skipped, 4);
        assert_eq!(rd.run.unknown, 1);
        assert_eq!(
            agent_session::read(&p, "r", Cli::Claude).as_deref(),
            Some("s1")
        );
        let (recs, bad) = activity::read(&p, "r").unwrap();
        assert_eq!(bad, 0);
        assert!(recs
            .iter()
            .any(|a| a.kind == Kind::Text && a.text.as_deref() == Some("hi")));
        // The unsafe id was refused, with a note.
        assert!(recs.iter().any(|a| a.kind == Kind::Note));
    }
}
