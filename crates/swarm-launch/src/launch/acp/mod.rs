//! `runtime: acp`: a role's agent driven through the Agent Client Protocol
//! (agentclientprotocol.com; docs/agents.md, "The ACP runtime"). `swarm
//! acp --role R` is what the role's pane or the headless supervisor runs:
//! it starts the role's CLI as an ACP agent, confined like every agent
//! (the CLI alone, inside `swarm sandbox`; this client, which writes the
//! telemetry and sends the person's questions, runs outside, as `swarm
//! turn` does), opens one session in the role's worktree and keeps it for
//! as long as it runs, and drives it:
//!
//! - work waits (new mail or an item in process) and no turn runs: one
//!   `session/prompt` telling the agent to take it; mail that arrives
//!   while a turn runs waits in the inbox and is prompted for when the
//!   turn ends. Nothing is typed into a screen and nothing cancels a turn;
//! - `session/update` notifications are the role's activity, the prompt's
//!   answer its usage ([`record`]);
//! - `session/request_permission` is a person's decision ([`permission`]);
//! - the client offers no file system and no terminal: a request for one
//!   is refused, so the agent reads and writes only what its own tools in
//!   its sandbox can.
//!
//! The invariants: one thread writes to the agent (this loop); every line
//! read from it is bounded ([`rpc`]); nothing it sends stops the client but
//! its exit; a turn that leaves the queue as it found it is a stall that
//! backs off and, after [`MAX_STALLS`](crate::launch::MAX_STALLS), waits
//! for the inbox to change, as the headless supervisor does; a role that
//! waits for a person's answer to its clarify is not prompted until mail
//! arrives.

pub mod cancel;
pub mod command;
mod decisions;
pub mod grants;
pub mod permission;
pub mod predecided;
pub mod record;
pub mod rpc;
mod session;
mod shown;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::launch::agent_session;
use crate::launch::agents::Cli;
use crate::launch::plan::{Plan, PlannedRole};
use crate::launch::supervisor::{asked_a_person, backoff, fingerprint, pending};
use crate::launch::{MAX_STALLS, TICK};
use permission::{Asked, Decision};
use record::Recorder;
use rpc::{Conn, Incoming};

/// The protocol version this client speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// How long the agent may take to answer `initialize` and open a session.
const START_DEADLINE: Duration = Duration::from_secs(120);
/// The shortest pause between two looks at the inbox when a file event
/// says it changed (events from a folder the agent can write are bounded).
const MIN_LOOK: Duration = Duration::from_millis(5);
/// The most permission requests waiting for a person at once; more are
/// refused (an agent could flood the person's inbox).
const MAX_ASKED: usize = 8;

/// Why the client stopped.
#[derive(Debug)]
pub enum Ended {
    /// A signal asked it to.
    Stopped,
    /// The agent exited (its status).
    AgentExited(Option<i32>),
}

/// What a session is opened with beyond its folder (launch/acp/command.rs).
struct Setup {
    /// `_meta` of `session/new` and `session/load`.
    meta: Option<Value>,
    /// The mode set once the session is open (`session/set_mode`).
    mode: Option<&'static str>,
}

/// One role's client.
struct Client<'a> {
    plan: &'a Plan,
    /// Set by a signal: the client stops, also while the agent starts.
    stop: &'a AtomicBool,
    /// When the inboxes and the people's answers were last looked at.
    looked: Option<Instant>,
    r: &'a PlannedRole,
    conn: Conn,
    rec: Recorder,
    session: String,
    /// The outstanding `session/prompt`, if a turn runs.
    prompt: Option<u64>,
    /// Prompts sent in this session (the first one may carry the primer).
    prompts: u32,
    /// The conversation was loaded (it has its instructions).
    loaded: bool,
    /// The prompt of a new conversation, and of every later turn.
    first_prompt: String,
    next_prompt: String,
    asked: Vec<(Asked, Option<String>)>,
    /// The queue when the turn began; stalls and their back-off.
    before: [usize; 4],
    stalls: u32,
    not_before: Instant,
    /// Waiting for the inbox to change (parked after stalls, or waiting
    /// for a person's answer): the fingerprint it waits to differ from.
    hold: Option<[usize; 4]>,
    said_fs: bool,
    /// The person who cancelled the running turn (`swarm cancel`).
    cancelled_by: Option<String>,
    /// Unreadable lines already said in a note.
    said_unreadable: usize,
    /// What swarm.yaml pre-decides for the role's tools, as read at start.
    rules: predecided::Rules,
    /// The error the last turn ended with, until a later turn starts.
    blocked: Option<String>,
    /// The state last written for `swarm status` ([`shown`]).
    shown: Option<(&'static str, String)>,
    /// A file event said the inbox changed since the last look.
    mail: bool,
}

/// Runs the ACP client of `role` until `stop` is set or its agent exits.
pub fn run(root: &Path, role: &str, stop: &AtomicBool, say: &mut dyn FnMut(&str)) -> Result<Ended> {
    let plan = Plan::load(root)?;
    let project = &plan.project;
    let (r, cli) = crate::launch::turn::preset_role(&plan, role)?;
    let (pf, primer) = crate::launch::turn::primer(project, role)?;
    let launch = crate::launch::turn::launch_of(&plan, r, cli, &pf);
    let cmd = crate::launch::confine::wrap_shell(&plan, r, &command::acp_command(cli, &launch)?)?;
    let (mut child, conn) = spawn_agent(r, cli, &cmd, say)?;
    let prompts = (
        launch.turn_prompt(false, &primer),
        launch.turn_prompt(true, &primer),
    );
    let mut c = Client::new(&plan, stop, r, cli, conn, prompts);
    let setup = Setup {
        meta: command::session_meta(cli, &primer),
        mode: command::session_mode(cli, launch.permission),
    };
    let out = c.start(cli, &setup, say).and_then(|()| c.serve(say));
    stop_agent(&mut child);
    c.withdraw_all(say);
    c.unshow();
    // Waited for at most the swarm's grace, then killed.
    let code = crate::sys::child::wait_bounded(child, crate::launch::GRACE)
        .ok()
        .and_then(|s| s.code());
    match out {
        Ok(Ended::AgentExited(_)) => {
            say(&format!("{role}: the agent exited (exit {code:?})"));
            Ok(Ended::AgentExited(code))
        }
        other => other,
    }
}

/// Starts the agent's shell (`cmd`, in `r`'s worktree), its output read
/// into a connection ([`rpc`]), its errors passed on to ours (the role's
/// log or pane).
fn spawn_agent(
    r: &PlannedRole,
    cli: Cli,
    cmd: &str,
    say: &mut dyn FnMut(&str),
) -> Result<(Child, Conn)> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env(crate::launch::agents::transcript::HEADLESS_ENV, "1")
        .current_dir(&r.worktree_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::process(format!("cannot start sh for {}: {e}", cli.name())))?;
    say(&format!(
        "{}: {} started as an ACP agent (pid {})",
        r.name,
        cli.name(),
        child.id()
    ));
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(out) = child.stdout.take() {
        let tx = tx.clone();
        std::thread::spawn(move || rpc::read_into(out, tx));
    }
    if let Some(mut err) = child.stderr.take() {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut err, &mut std::io::stderr());
        });
    }
    // New mail wakes the loop at once (docs/benchmarks.md, the wake path):
    // the thread ends within a second of the client.
    let inbox = r.worktree().inbox_new();
    let mail = tx.clone();
    std::thread::spawn(move || {
        let mut w = crate::sys::watch::DirWatch::new(vec![inbox]);
        loop {
            w.wait_for(Duration::from_secs(1));
            if mail.send(Incoming::Mail).is_err() {
                return;
            }
        }
    });
    let Some(stdin) = child.stdin.take() else {
        stop_agent(&mut child);
        return Err(Error::internal("the agent's stdin was not piped"));
    };
    Ok((child, Conn::new(Box::new(stdin), rx)))
}

impl<'a> Client<'a> {
    /// The client of role `r` over `conn`, before its session is open;
    /// `prompts`: a new conversation's first prompt and every later one.
    fn new(
        plan: &'a Plan,
        stop: &'a AtomicBool,
        r: &'a PlannedRole,
        cli: Cli,
        conn: Conn,
        prompts: (String, String),
    ) -> Client<'a> {
        let max_bytes = plan.config.limits.max_file_bytes;
        let rec = Recorder::new(&plan.project, &r.name, cli, r.worktree(), max_bytes);
        let rules = plan.config.roles.iter().find(|x| x.name == r.name);
        Client {
            plan,
            stop,
            looked: None,
            r,
            conn,
            rec,
            session: String::new(),
            prompt: None,
            prompts: 0,
            loaded: false,
            first_prompt: prompts.0,
            next_prompt: prompts.1,
            asked: Vec::new(),
            before: [0; 4],
            stalls: 0,
            not_before: Instant::now(),
            hold: None,
            said_fs: false,
            cancelled_by: None,
            said_unreadable: 0,
            rules: rules.map_or_else(Default::default, |x| predecided::Rules::new(&x.permissions)),
            blocked: None,
            shown: None,
            mail: false,
        }
    }
}

/// `params` with `_meta` added, when there is one.
fn with_meta(mut params: Value, meta: &Option<Value>) -> Value {
    if let Some(m) = meta {
        params["_meta"] = m.clone();
    }
    params
}

/// Closes the agent's input and ends it (SIGTERM to its shell, which
/// `exec`s the CLI or the sandbox; bwrap dies with its parent).
fn stop_agent(child: &mut Child) {
    drop(child.stdin.take());
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let (Ok(None), Some(pid)) = (child.try_wait(), pid) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

impl Client<'_> {
    fn role(&self) -> &str {
        &self.r.name
    }

    /// Waits for the answer to request `id`, serving whatever else comes.
    fn wait_for(&mut self, id: u64, what: &str, say: &mut dyn FnMut(&str)) -> Result<Value> {
        let end = Instant::now() + START_DEADLINE;
        while Instant::now() < end {
            if self.stop.load(Ordering::Relaxed) {
                return Err(Error::process(format!(
                    "the client of role {} was stopped while it waited for {what}",
                    self.role()
                )));
            }
            match self.conn.next(TICK) {
                Some(Incoming::Response { id: got, result }) if got == id => {
                    return result.map_err(|e| {
                        Error::process(format!(
                            "the agent of role {} refused {what}: {}",
                            self.role(),
                            crate::text::escape(&e)
                        ))
                    })
                }
                Some(Incoming::Closed) => {
                    return Err(Error::process(format!(
                        "the agent of role {} exited before it answered {what} (its log says why)",
                        self.role()
                    )))
                }
                Some(m) => self.serve_one(m, say)?,
                None => {}
            }
        }
        Err(Error::process(format!(
            "the agent of role {} did not answer {what} within {} s",
            self.role(),
            START_DEADLINE.as_secs()
        )))
    }

    fn io(&self, e: std::io::Error) -> Error {
        Error::process(format!("writing to the agent of role {}: {e}", self.role()))
    }

    /// The loop: prompts when work waits, hands decisions back.
    fn serve(&mut self, say: &mut dyn FnMut(&str)) -> Result<Ended> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                if self.prompt.is_some() {
                    let _ = self
                        .conn
                        .notify("session/cancel", json!({"sessionId": self.session}));
                    self.rec.turn_end(Err("stopped: the swarm is going down"));
                }
                return Ok(Ended::Stopped);
            }
            // At most once a tick, however fast the agent talks; sooner
            // when a file event says mail came.
            let pace = if self.mail { MIN_LOOK } else { TICK };
            if self.looked.is_none_or(|t| t.elapsed() >= pace) {
                self.looked = Some(Instant::now());
                self.mail = false;
                if let Some(by) = cancel::take(&self.plan.project, self.role()) {
                    self.cancel(&by, say)?;
                }
                self.decisions(say)?;
                if self.prompt.is_none() {
                    self.maybe_prompt(say)?;
                }
            }
            match self.conn.next(if self.mail { MIN_LOOK } else { TICK }) {
                Some(Incoming::Mail) => self.mail = true,
                Some(Incoming::Closed) => {
                    if self.prompt.take().is_some() {
                        self.rec.turn_end(Err("the agent exited during the turn"));
                    }
                    return Ok(Ended::AgentExited(None));
                }
                Some(m) => self.serve_one(m, say)?,
                None => {}
            }
            self.show();
        }
    }

    /// Prompts the agent when work waits and nothing holds the role.
    fn maybe_prompt(&mut self, say: &mut dyn FnMut(&str)) -> Result<()> {
        let wt = self.r.worktree();
        let now = fingerprint(&wt);
        if self.hold.is_some_and(|h| h == now) || Instant::now() < self.not_before || !pending(&wt)
        {
            return Ok(());
        }
        self.hold = None;
        if crate::telemetry::budget::parked(&self.plan.project, self.role()).is_some() {
            say(&format!(
                "{}: parked, its budget is used up; not prompted until its inbox changes (`swarm budget raise` lets it go on)",
                self.role()
            ));
            self.hold = Some(now);
            return Ok(());
        }
        let text = if self.prompts > 0 || self.loaded {
            self.next_prompt.clone()
        } else {
            self.first_prompt.clone()
        };
        let id = self
            .conn
            .request(
                "session/prompt",
                json!({"sessionId": self.session, "prompt": [{"type": "text", "text": text}]}),
            )
            .map_err(|e| self.io(e))?;
        self.prompt = Some(id);
        self.blocked = None;
        self.prompts += 1;
        self.before = now;
        self.rec.turn_start(&format!(
            "{} (acp) prompt {} in session {}",
            self.rec.cli.name(),
            self.prompts,
            self.session
        ));
        say(&format!("{}: prompt {} sent", self.role(), self.prompts));
        Ok(())
    }

    /// A turn ended: judged as the headless supervisor judges a run.
    fn turn_ended(
        &mut self,
        result: std::result::Result<Value, String>,
        say: &mut dyn FnMut(&str),
    ) {
        let unreadable = self.conn.unreadable - self.said_unreadable;
        if unreadable > 0 {
            self.said_unreadable = self.conn.unreadable;
            self.rec.note(&format!(
                "skipped {unreadable} unreadable line(s) from the agent (not JSON-RPC, or longer than {} bytes)",
                rpc::MAX_LINE
            ));
        }
        self.rec.turn_end(result.as_ref().map_err(String::as_str));
        self.blocked = result
            .as_ref()
            .err()
            .map(|e| format!("the turn ended with an error: {}", crate::text::escape(e)));
        let wt = self.r.worktree();
        let after = fingerprint(&wt);
        say(&format!(
            "{}: turn ended ({})",
            self.role(),
            match &result {
                Ok(v) => v["stopReason"].as_str().unwrap_or("?").to_string(),
                Err(e) => crate::text::escape(e),
            }
        ));
        if let Some(by) = self.cancelled_by.take() {
            self.hold = Some(after);
            self.stalls = 0;
            say(&format!(
                "{}: {by} cancelled the turn; its item stays where it is; not prompted again until its inbox changes",
                self.role()
            ));
            return;
        }
        if pending(&wt) && after[1] > 0 {
            if let Some(asked) = asked_a_person(self.plan, self.role()) {
                self.hold = Some(after);
                self.stalls = 0;
                say(&format!(
                    "{}: waits for {}; not prompted again until mail arrives",
                    self.role(),
                    asked.join(", ")
                ));
                return;
            }
        }
        if after == self.before && pending(&wt) {
            self.stalls += 1;
            self.not_before = Instant::now() + backoff(self.stalls);
            if self.stalls >= MAX_STALLS {
                self.hold = Some(after);
                say(&format!(
                    "{}: {} turns in a row left its queue untouched; not prompted again until its inbox changes",
                    self.role(),
                    self.stalls
                ));
            }
        } else {
            self.stalls = 0;
        }
    }

    /// One message from the agent.
    fn serve_one(&mut self, m: Incoming, say: &mut dyn FnMut(&str)) -> Result<()> {
        match m {
            Incoming::Response { id, result } if Some(id) == self.prompt => {
                self.prompt = None;
                self.turn_ended(result, say);
            }
            // An answer to nothing outstanding (a cancelled load): dropped.
            Incoming::Response { .. }
            | Incoming::Unreadable
            | Incoming::Closed
            | Incoming::Mail => {}
            Incoming::Notification { method, params } => {
                if method == "session/update"
                    && params["sessionId"] == self.session.as_str()
                    && self.prompt.is_some()
                {
                    self.rec.update(&params["update"]);
                }
            }
            Incoming::Request { id, method, params } => self.request(id, &method, &params, say)?,
        }
        Ok(())
    }
}
