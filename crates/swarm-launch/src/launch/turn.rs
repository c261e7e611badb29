//! One headless turn of a preset agent (`swarm turn --role R`, what a
//! headless role's supervisor or tmux pane runs; docs/headless.md): the
//! CLI runs once, non-interactively, in the role's worktree, resuming the
//! role's conversation, and its JSON event stream is read line by line
//! into the role's session file, activity file and the usage journal.
//! This reader runs outside the sandbox and confines only the CLI
//! (launch/confine/): the telemetry is not the agent's to write.
//!
//! No terminal, no keystrokes, no trust dialog. The stream is untrusted:
//! every line is bounded ([`MAX_LINE`]); a line too long, not UTF-8, not
//! JSON, or an event type we do not know is skipped and counted in a note
//! at the turn's end, and nothing a CLI prints stops the turn or corrupts
//! a file (each record is one bounded append).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// The largest primer read (a primer is a few kB; not a message).
const MAX_PRIMER: u64 = 1024 * 1024;

use serde_json::Value;

use crate::daemon::journal::{self, Event as JournalEvent};
use crate::error::{Error, Result};
use crate::fsx;
use crate::launch::agent_session;
use crate::launch::agents::stream::{self, Event, Figures};
use crate::launch::agents::{Cli, Launch};
use crate::launch::command::instructions_in_file;
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};
use crate::protocol::launch_files::prompt_file;
use crate::protocol::layout::{Project, Worktree};
use crate::telemetry::activity::{self, Activity, Kind};
use crate::telemetry::usage;

/// The longest stream line read; the rest of a longer one is skipped.
pub const MAX_LINE: usize = 1024 * 1024;
/// The stderr kept to judge a refused resume.
const STDERR_TAIL: usize = 4096;

/// How a turn went.
#[derive(Clone, Debug, Default)]
pub struct Turn {
    /// The CLI's exit code (None: killed by a signal; also when no turn ran).
    pub code: Option<i32>,
    /// Whether the CLI ran at all (nothing waiting: no turn).
    pub ran: bool,
    /// A resume was refused and the turn ran again in a new conversation.
    pub started_fresh: bool,
    /// Lines skipped (too long, not UTF-8, not JSON) and unknown events.
    pub skipped: usize,
    pub unknown: usize,
}

/// The role's preset, or why it has none.
pub(crate) fn preset_role<'a>(plan: &'a Plan, role: &str) -> Result<(&'a PlannedRole, Cli)> {
    let r = plan.roles.iter().find(|r| r.name == role).ok_or_else(|| {
        Error::not_found(format!(
            "role '{role}' is not in {}",
            plan.source.path().display()
        ))
    })?;
    match &r.agent {
        AgentSpec::Preset { cli, .. } => Ok((r, *cli)),
        _ => Err(Error::bad_input(format!(
            "role '{role}' does not run a preset agent (claude, codex, gemini); a headless turn needs one\n  hint: set `agent: claude` (or codex, gemini) for it in {}",
            plan.source.path().display()
        ))),
    }
}

/// The role's primer file and its text (bounded).
pub(crate) fn primer(project: &Project, role: &str) -> Result<(std::path::PathBuf, String)> {
    let pf = prompt_file(project, role);
    let primer = fsx::read_bounded(&pf, MAX_PRIMER)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|_| {
            Error::bad_file_hint(&pf, "the role's primer is missing", "`swarm up` writes it")
        })?;
    Ok((pf, primer))
}

/// What the preset `cli` of `r` needs to build its command line (both a
/// headless turn and an ACP agent, launch/acp/).
pub(crate) fn launch_of<'a>(
    plan: &'a Plan,
    r: &'a PlannedRole,
    cli: Cli,
    pf: &'a Path,
) -> Launch<'a> {
    let (model, args, permission) = match &r.agent {
        AgentSpec::Preset {
            model,
            args,
            permission,
            ..
        } => (model.as_deref(), &args[..], *permission),
        _ => (None, &[][..], Default::default()),
    };
    Launch {
        role: &r.name,
        root: &plan.project.root,
        worktree: &r.worktree_path,
        prompt_file: pf,
        model,
        args,
        permission,
        instructions_in_file: instructions_in_file(cli, r),
        mcp: plan.config.role(&r.name).is_some_and(|c| c.mcp),
        confined: crate::launch::confine::enabled(plan),
    }
}

/// Runs one turn for `role` if work waits for it (new items or one in
/// process); says what it does through `say`.
pub fn turn(root: &Path, role: &str, say: &mut dyn FnMut(&str)) -> Result<Turn> {
    let plan = Plan::load(root)?;
    let project = &plan.project;
    let (r, cli) = preset_role(&plan, role)?;
    let wt = r.worktree();
    if !crate::launch::supervisor::pending(&wt) {
        say(&format!("{role}: no work waits; no turn"));
        return Ok(Turn::default());
    }
    // A parked role starts no turn; its item stays where it is until a
    // raise or the next period (docs/cost.md, "Budgets").
    if let Some(why) = crate::telemetry::budget::parked(project, role) {
        say(&format!(
            "{role}: parked, the budget of {} is used up; no turn (`swarm budget raise` lets it go on)",
            why.budget_of
        ));
        return Ok(Turn::default());
    }
    let (pf, primer) = primer(project, role)?;
    let launch = launch_of(&plan, r, cli, &pf);
    let mut out = Turn::default();
    loop {
        let resume = agent_session::read(project, role, cli);
        let prompt = launch.turn_prompt(resume.is_some(), &primer);
        // The CLI alone is confined: this reader, which writes the
        // telemetry, runs outside the sandbox (launch/confine/).
        let command = crate::launch::confine::wrap_shell(
            &plan,
            r,
            &cli.preset().turn(&launch, resume.as_deref(), &prompt),
        )?;
        let max_bytes = plan.config.limits.max_file_bytes;
        let run = run_once(project, r, cli, &command, resume.as_deref(), max_bytes, say)?;
        out.ran = true;
        out.code = run.code;
        out.skipped += run.skipped;
        out.unknown += run.unknown;
        let Some(old) = resume.filter(|_| run.refused_resume()) else {
            return Ok(out);
        };
        // The CLI no longer knows the conversation: a new one, said so.
        agent_session::forget(project, role)?;
        let why = format!(
            "the {} CLI refused to resume session {old}; this turn starts a new conversation",
            cli.name()
        );
        say(&format!("{role}: {why}"));
        journal::record_outside(
            project,
            &JournalEvent::new(journal::Kind::ResumeRefused)
                .recipient(role)
                .reason(crate::text::escape(&why)),
        );
        let _ = activity::append(project, &Activity::now(role, Kind::Note).text(&why));
        out.started_fresh = true;
    }
}

/// One CLI run's reading.
#[derive(Default)]
struct Run {
    code: Option<i32>,
    /// What the agent did (text, thinking, tool calls and results).
    acted: usize,
    /// The error events' texts (bounded).
    errors: String,
    stderr_tail: String,
    skipped: usize,
    unknown: usize,
}

impl Run {
    /// A resume the CLI refused: it failed before the agent did anything,
    /// saying (on stderr or in an error event) that it does not know the
    /// session.
    fn refused_resume(&self) -> bool {
        let e = format!("{}\n{}", self.stderr_tail, self.errors).to_lowercase();
        self.code.is_some_and(|c| c != 0)
            && self.acted == 0
            && [
                // Claude Code 2.1: "No conversation found with session ID".
                "no conversation found",
                // Gemini CLI 0.61: "Error resuming session: No previous
                // sessions found for this project."
                "error resuming session",
                "no previous session",
                "not found",
                "no session",
                "invalid session",
                "could not find",
                "cannot find",
                "does not exist",
                // Codex 0.171: "no rollout found for thread id <id>".
                "no rollout",
                "unknown session",
            ]
            .iter()
            .any(|m| e.contains(m))
    }
}

/// What the reader keeps while a turn runs.
struct Reader<'a> {
    project: &'a Project,
    role: &'a str,
    cli: Cli,
    wt: Worktree,
    /// `limits.max_file_bytes`, for reading the item in process.
    max_bytes: u64,
    /// The handoff worked on: the latest seen in process during the turn
    /// (it stays attributed after `done` moved it on).
    item: Option<(String, String)>,
    model: Option<String>,
    session: Option<String>,
    run: Run,
    unknown_types: Vec<String>,
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
    gave_up: bool,
}

impl Reader<'_> {
    fn look_at_item(&mut self) {
        if let Some(it) = crate::launch::turn_item::current_item(&self.wt, self.max_bytes)
            .or_else(|| self.items.as_ref().and_then(|w| w.last()))
        {
            self.item = Some(it);
        }
    }

    fn record(&self, mut a: Activity) {
        a.id = self.item.as_ref().map(|(id, _)| id.clone());
        if let Err(e) = activity::append(self.project, &a) {
            eprintln!("warning: {e}");
        }
    }

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

    fn unblock(&mut self) {
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
                if self.unknown_types.len() < 8 && !self.unknown_types.contains(&t) {
                    self.unknown_types.push(activity::bound(&t));
                }
            }
        }
    }

    /// `f` less what the conversation had reported before, for a CLI that
    /// reports running totals; the new total is kept for the next turn.
    fn this_turn(&self, f: Figures) -> Figures {
        if !stream::cumulative(self.cli) {
            return f;
        }
        let Some(session) = self.session.as_deref() else {
            return f;
        };
        let file = agent_session::totals_path(self.project, self.role);
        let before: Vec<u64> = fsx::read_bounded(&file, 4096)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| {
                let mut w = t.split_whitespace();
                (w.next() == Some(session)).then(|| w.filter_map(|x| x.parse().ok()).collect())
            })
            .unwrap_or_default();
        let was = |i: usize| before.get(i).copied().unwrap_or(0);
        let line = format!(
            "{session} {} {} {} {}\n",
            f.input_tokens, f.output_tokens, f.cache_read_tokens, f.cache_write_tokens
        );
        if let Err(e) = fsx::replace(
            file.parent().unwrap_or(Path::new(".")),
            &file,
            line.as_bytes(),
        ) {
            eprintln!("warning: {}: {e}", file.display());
        }
        Figures {
            input_tokens: f.input_tokens.saturating_sub(was(0)),
            output_tokens: f.output_tokens.saturating_sub(was(1)),
            cache_read_tokens: f.cache_read_tokens.saturating_sub(was(2)),
            cache_write_tokens: f.cache_write_tokens.saturating_sub(was(3)),
            ..f
        }
    }

    fn usage(&self, f: Figures) {
        let f = self.this_turn(f);
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
fn read_lines(from: impl Read, reader: &mut Reader) {
    crate::launch::acp::rpc::each_line(from, MAX_LINE, |line| {
        match line {
            Some(b) => reader.line(b),
            None => reader.run.skipped += 1,
        }
        true
    });
}

fn run_once(
    project: &Project,
    r: &PlannedRole,
    cli: Cli,
    command: &str,
    resume: Option<&str>,
    max_bytes: u64,
    say: &mut dyn FnMut(&str),
) -> Result<Run> {
    let role = r.name.as_str();
    let mut start = Activity::now(role, Kind::TurnStart).text(&match resume {
        Some(id) => format!("{} resumes session {id}", cli.name()),
        None => format!("{} starts a new conversation", cli.name()),
    });
    start.name = Some(cli.name().to_string());
    start.pid = Some(std::process::id());
    let mut reader = Reader {
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
        started: Some(start.time.clone()),
        items: Some(crate::launch::turn_item::ItemWatch::start(
            &r.worktree(),
            max_bytes,
        )),
        blocked: matches!(
            crate::daemon::pane::reported(project, role),
            Some((crate::daemon::pane::Wait::Blocked, ..))
        ),
        gave_up: false,
    };
    reader.record(start);
    say(&format!(
        "{role}: {} turn{}",
        cli.name(),
        resume
            .map(|id| format!(", resuming session {id}"))
            .unwrap_or_default()
    ));
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        // The turn-end hook leaves this turn's transcript alone: its
        // stream is read here (agents/transcript.rs).
        .env(crate::launch::agents::transcript::HEADLESS_ENV, "1")
        .current_dir(&r.worktree_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::process(format!("cannot start sh for {}: {e}", cli.name())))?;
    // stderr goes on to ours (the agent's log); its tail is kept.
    let err = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut tail: Vec<u8> = Vec::new();
            let mut chunk = [0u8; 8192];
            while let Ok(n) = e.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let _ = std::io::stderr().write_all(&chunk[..n]);
                tail.extend_from_slice(&chunk[..n]);
                if tail.len() > STDERR_TAIL {
                    tail.drain(..tail.len() - STDERR_TAIL);
                }
            }
            String::from_utf8_lossy(&tail).into_owned()
        })
    });
    if let Some(out) = child.stdout.take() {
        read_lines(out, &mut reader);
    }
    let status = child
        .wait()
        .map_err(|e| Error::process(format!("waiting for {}: {e}", cli.name())))?;
    if !reader.gave_up {
        reader.unblock();
    }
    reader.run.stderr_tail = err.and_then(|h| h.join().ok()).unwrap_or_default();
    reader.run.code = status.code();
    if reader.run.skipped + reader.run.unknown > 0 {
        let note = format!(
            "skipped {} unreadable line(s) and {} event(s) of unknown type{}",
            reader.run.skipped,
            reader.run.unknown,
            if reader.unknown_types.is_empty() {
                String::new()
            } else {
                format!(" ({})", reader.unknown_types.join(", "))
            }
        );
        reader.record(Activity::now(role, Kind::Note).text(&note));
    }
    reader.look_at_item();
    let mut end = Activity::now(role, Kind::TurnEnd);
    end.status = Some(match status.code() {
        Some(0) => "ok".into(),
        Some(c) => format!("exit {c}"),
        None => format!("killed ({status})"),
    });
    reader.record(end);
    say(&format!("{role}: turn ended ({status})"));
    Ok(reader.run)
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
