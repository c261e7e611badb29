//! Whether each role's agent is `busy`, `idle`, `dead`, `parked`,
//! `needs_input`, `blocked` or `waiting` (for a person's answer; set by the
//! status view, which holds the open clarifies), since when, and why a role
//! with waiting work is not moving (`swarm status`).
//!
//! With tmux: a missing session or a pane whose agent exited with an error
//! (the pane script's state file) is dead, the reason its exit status and
//! the first line its last run printed in the pane; an agent that exited 0 waits for
//! its next wake-up: idle. A pane showing a dialog, a menu or a permission
//! request is `needs_input`, one showing a rate limit or an authentication
//! error `blocked` (daemon/pane.rs, the prompt's words as the detail);
//! otherwise the window's last output time tells busy (output within the
//! quiet window) from idle. Headless: a role whose agent died at start
//! (protocol::start_failure's record) is dead with the record's reason, a
//! running agent process is busy, a parked role parked, else idle. An ACP
//! role's running client says itself whether its agent is busy, idle,
//! waiting for a person's decision or blocked on an error (its state
//! file, launch/acp/shown.rs), in a pane or headless. No swarm
//! running, or a tmux socket pointer that cannot be believed
//! (protocol::tmux_socket; the status says why): unknown.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::daemon::{pane, wake};
use crate::fsx;
use crate::protocol::launch_files::{
    acp_state_file, agent_parked_file, agent_pid_file, supervisor_pid_file, AgentRun,
};
use crate::protocol::layout::Project;
use crate::protocol::roles::{Role, Roles};
use crate::protocol::start_failure::{self, Death};
use crate::protocol::swarm::Swarm;
use crate::protocol::tmux_socket;
use crate::sys::tmux;
use crate::views::attention;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Busy,
    Idle,
    Dead,
    Parked,
    /// The pane waits for a person: a dialog, menu or permission request.
    NeedsInput,
    /// The pane shows a rate limit or an authentication error.
    Blocked,
    /// Its item waits in process for a person's answer to its clarify.
    Waiting,
}

impl State {
    pub fn word(self) -> &'static str {
        match self {
            State::Busy => "busy",
            State::Idle => "idle",
            State::Dead => "dead",
            State::Parked => "parked",
            State::NeedsInput => "needs_input",
            State::Blocked => "blocked",
            State::Waiting => "waiting",
        }
    }
}

/// One agent's liveness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Liveness {
    pub state: State,
    /// ISO time: last output (busy, idle), exit or death (dead), parking.
    pub since: Option<String>,
    /// What a `needs_input` / `blocked` pane shows (its prompt, one line).
    pub detail: Option<String>,
    /// The options of a recognised menu and the keys that choose each.
    pub options: Vec<pane::Choice>,
    /// Why a `dead` agent is dead: `exit <status>: <first line of its error>`.
    pub reason: Option<String>,
}

impl Liveness {
    fn new(state: State, since: Option<String>) -> Liveness {
        Liveness {
            state,
            since,
            detail: None,
            options: Vec::new(),
            reason: None,
        }
    }

    fn dead(since: Option<String>, reason: String) -> Liveness {
        Liveness {
            reason: Some(reason),
            ..Liveness::new(State::Dead, since)
        }
    }
}

/// How the swarm runs, looked up once per `swarm status`.
pub enum Runner {
    Tmux {
        socket: PathBuf,
        quiet: Duration,
    },
    /// A tmux swarm whose socket pointer cannot be believed: the message
    /// (protocol::tmux_socket); no pane is looked at, liveness is unknown.
    Refused(String),
    Headless,
    None,
}

fn read_small(p: &Path) -> Option<String> {
    fsx::read_bounded(p, 4096)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn iso_of_epoch(secs: u64) -> String {
    let t: chrono::DateTime<chrono::Utc> = (UNIX_EPOCH + Duration::from_secs(secs)).into();
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn now_epoch() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Runner {
    pub fn of(project: &Project) -> Runner {
        Runner::in_swarm(&Swarm::new(project.clone()))
    }

    /// [`Runner::of`] in a loaded swarm.
    pub fn in_swarm(swarm: &Swarm) -> Runner {
        let project = &swarm.project;
        match tmux_socket::read(project).socket(project) {
            Err(e) => return Runner::Refused(e.to_string()),
            Ok(None) => {}
            Ok(Some(socket)) => {
                let quiet = swarm
                    .config()
                    .map(|c| c.wake.quiet.0)
                    .unwrap_or(Duration::from_secs(1));
                return Runner::Tmux { socket, quiet };
            }
        }
        if fsx::lock_holder(&supervisor_pid_file(project)).is_some() {
            return Runner::Headless;
        }
        Runner::None
    }

    pub fn liveness(&self, project: &Project, r: &Role) -> Option<Liveness> {
        if r.is_human() || r.is_remote() {
            return None;
        }
        match self {
            Runner::None | Runner::Refused(_) => None,
            Runner::Headless => headless_liveness(project, r),
            Runner::Tmux { socket, quiet } => tmux_liveness(project, r, socket, *quiet),
        }
    }
}

/// What a running ACP client says its agent does (launch/acp/shown.rs):
/// `busy`, `idle`, `waiting` (for a person's decision, the detail naming
/// it) or `blocked` (the error). None: no client runs, or the file says
/// something else.
fn acp_liveness(project: &Project, r: &Role) -> Option<Liveness> {
    let line = read_small(&acp_state_file(project, &r.name))?;
    let mut f = line.splitn(3, '\t');
    let state = match f.next()? {
        "busy" => State::Busy,
        "idle" => State::Idle,
        "waiting" => State::Waiting,
        "blocked" => State::Blocked,
        _ => return None,
    };
    let since = f.next().filter(|t| !t.is_empty()).map(str::to_string);
    let detail = f
        .next()
        .map(|d| crate::text::escape(d.trim()))
        .filter(|d| !d.is_empty());
    Some(Liveness {
        detail,
        ..Liveness::new(state, since)
    })
}

/// A headless agent's state: from its death record, its parked file, its
/// pid file and what its turn reported (an ACP client: what it says).
fn headless_liveness(project: &Project, r: &Role) -> Option<Liveness> {
    if let Some(d) = Death::read(project, &r.name) {
        return Some(Liveness::dead(Some(d.at.clone()), d.reason()));
    }
    if let Some(t) = read_small(&agent_parked_file(project, &r.name)) {
        return Some(Liveness::new(State::Parked, Some(t)));
    }
    let running = agent_pid_file(project, &r.name).exists();
    // Its turn's CLI retries a request the model refused
    // (launch/turn/reader.rs writes the marker, and removes it when the
    // turn gets on or ends).
    if let Some((pane::Wait::Blocked, since, text)) =
        pane::reported(project, &r.name).filter(|_| running)
    {
        return Some(Liveness {
            state: State::Blocked,
            since: Some(since),
            detail: Some(text),
            options: Vec::new(),
            reason: None,
        });
    }
    if let Some(l) = acp_liveness(project, r).filter(|_| running) {
        return Some(l);
    }
    Some(Liveness::new(
        if running { State::Busy } else { State::Idle },
        None,
    ))
}

/// An agent in tmux: from its pane (gone, exited, asking) and the window's
/// last output.
fn tmux_liveness(project: &Project, r: &Role, socket: &Path, quiet: Duration) -> Option<Liveness> {
    let run = AgentRun::of(project, &r.name);
    let reply = tmux::call(
        socket,
        &[
            "display-message",
            "-p",
            "-t",
            &format!("={}:", r.session),
            "#{window_activity}",
        ],
    );
    let activity = match reply {
        Ok(rep) if rep.ok => rep.stdout.trim().parse::<u64>().ok(),
        _ => {
            let since = read_small(&project.daemon_dir().join("dead").join(&r.name));
            return Some(Liveness::new(State::Dead, since));
        }
    };
    if let Some(AgentRun::Exited { at, status }) = &run {
        let since = at.map(iso_of_epoch);
        if !run.as_ref().is_some_and(AgentRun::failed) {
            return Some(Liveness::new(State::Idle, since));
        }
        let screen = tmux::capture(socket, &r.session).unwrap_or_default();
        let death = Death {
            status: status.clone(),
            at: since.clone().unwrap_or_default(),
            lines: start_failure::error_lines(&start_failure::last_run_in_pane(&screen)),
        };
        return Some(Liveness::dead(since, death.reason()));
    }
    if let Some(l) = acp_liveness(project, r) {
        return Some(l);
    }
    if let Ok(Some(p)) = pane::look(socket, &r.session) {
        let since = pane::reported(project, &r.name)
            .filter(|(w, _, t)| *w == p.wait && *t == p.text)
            .map(|(_, at, _)| at);
        return Some(Liveness {
            state: match p.wait {
                pane::Wait::NeedsInput => State::NeedsInput,
                pane::Wait::Blocked => State::Blocked,
            },
            since,
            detail: Some(p.text),
            options: p.options,
            reason: None,
        });
    }
    let Some(at) = activity else {
        return Some(Liveness::new(State::Idle, None));
    };
    // Output within two quiet windows (at least 2 s, the clock's
    // resolution here) counts as busy.
    let window = (quiet.as_secs() * 2).max(2);
    let busy = now_epoch().saturating_sub(at) < window;
    Some(Liveness::new(
        if busy { State::Busy } else { State::Idle },
        Some(iso_of_epoch(at)),
    ))
}

/// The people whose answer `r`'s item in process waits on (a clarify it
/// sent to a human role is open): then an idle or parked agent is not
/// idle, nor stalled, but `waiting` for them, and `live` says so. An ACP
/// agent its client says waits (for a person's decision on a permission
/// request) waits for the people its open clarifies go to, item in
/// process or not. Empty, and `live` as it was, otherwise. `swarm status`
/// and the cockpit's cards ask this one function.
pub fn waiting_for(
    roles: &Roles,
    r: &Role,
    in_process: bool,
    attention: &[attention::Item],
    live: &mut Option<Liveness>,
) -> Vec<String> {
    let mut people: Vec<String> = Vec::new();
    let said = live.as_ref().is_some_and(|l| l.state == State::Waiting);
    if in_process || said {
        for a in attention.iter().filter(|a| {
            a.kind == attention::Kind::Clarify
                && a.from == r.name
                && roles.roles.iter().any(|h| h.name == a.role && h.is_human())
        }) {
            if !people.contains(&a.role) {
                people.push(a.role.clone());
            }
        }
    }
    match live.as_mut().filter(|l| {
        !people.is_empty() && matches!(l.state, State::Idle | State::Parked | State::Waiting)
    }) {
        Some(l) => l.state = State::Waiting,
        None => people.clear(),
    }
    people
}

/// Why a role with waiting items and nothing in process does not move.
pub fn not_moving(
    project: &Project,
    r: &Role,
    live: Option<&Liveness>,
    attention: &[attention::Item],
) -> Option<String> {
    if r.is_remote() {
        // Its queue here is the bridge's proxy: copies not yet published.
        return Some(format!(
            "waiting for the bridge to host {}",
            r.worktree_name.trim_start_matches('@')
        ));
    }
    if r.is_human() {
        return None;
    }
    if let Some(c) = attention
        .iter()
        .find(|a| a.kind == attention::Kind::Clarify && a.from == r.name)
    {
        return Some(format!("waiting on clarify {} to {}", c.id, c.role));
    }
    if let Some(b) = attention
        .iter()
        .find(|a| a.kind == attention::Kind::Budget && a.from == r.name)
    {
        return Some(format!("parked: {} ({})", b.text, b.handle));
    }
    match live.map(|l| l.state) {
        Some(State::Dead) => return Some("agent dead".into()),
        Some(State::Parked) => {
            return Some("agent parked after runs that left the queue untouched".into())
        }
        Some(State::NeedsInput) => {
            return Some(format!(
                "agent waits for a person: {} (swarm attach {})",
                live.and_then(|l| l.detail.as_deref()).unwrap_or("a prompt"),
                r.name
            ))
        }
        Some(State::Blocked) => {
            return Some(format!(
                "agent blocked: {}",
                live.and_then(|l| l.detail.as_deref()).unwrap_or("?")
            ))
        }
        _ => {}
    }
    if wake::deferred_file(project, &r.name).exists() {
        return Some("wake deferred: busy".into());
    }
    None
}
