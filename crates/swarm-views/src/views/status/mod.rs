//! `swarm status`: the daemon and each role's queue, read from the files, and
//! what needs a person (open clarifies, items waiting for human roles).
//!
//! Collected here into one [`Status`] (what `--json`, the MCP status tool and
//! the cockpit show); counted by [`queue`], drawn as text by [`text`].
//! Invariant: status only reads; a part that does not load (a config, a
//! record) is shown as a problem, never a reason to show nothing.

use std::fs;
use std::path::PathBuf;

use serde::Serialize;

use crate::agent::guard;
use crate::board;
use crate::bridge::control_view::{self, SwarmControl};
use crate::daemon::control;
use crate::daemon::gate::{self, Pause};
use crate::daemon::pane::Choice;
use crate::daemon::wake;
use crate::error::Result;
use crate::forum::requests;
use crate::fsx::read_bounded;
use crate::person::holds::{self, Held};
use crate::protocol::clock;
use crate::protocol::config::Limits;
use crate::protocol::layout::{symlinked_inbox_reason, Project, Worktree};
use crate::protocol::rejected_tasks::{self, Kept};
use crate::protocol::roles::{Role, Roles};
use crate::protocol::store;
use crate::protocol::swarm::Swarm;
use crate::protocol::{audit_pending, dashboard, wakeups};
use crate::reservations::{self, Reservation};
use crate::telemetry::activity::{self, Liveness};
use crate::telemetry::spend::{self, Spend};
use crate::views::attention;
use crate::views::liveness::{self, Runner};

mod queue;
mod text;

use queue::{age, completed_count};
pub use queue::{each_entry, waiting_since};
pub(crate) use queue::{in_process, items, waiting};
pub use text::text;

#[derive(Debug, Serialize)]
pub struct RoleStatus {
    pub role: String,
    pub mode: String,
    pub human: bool,
    pub worktree: PathBuf,
    pub new: usize,
    /// Seconds since the oldest waiting item arrived.
    pub oldest_new_age_s: Option<u64>,
    /// The item or batch in process.
    pub in_process: Option<PathBuf>,
    pub in_process_age_s: Option<u64>,
    /// Completed items (files in batch folders counted one by one).
    pub completed: usize,
    /// This worktree's refused outgoing originals.
    pub failed: usize,
    /// Outgoing files not yet delivered.
    pub outbox: usize,
    pub last_wake: Option<String>,
    /// `busy`, `idle`, `dead`, `parked`, `needs_input`, `blocked` or
    /// `waiting` (its item in process waits for a person's answer to its
    /// clarify); null for a person or when no swarm runs (views/liveness.rs).
    pub agent_state: Option<liveness::State>,
    /// A `dead` agent's reason: `exit <status>: <first line of its error>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_reason: Option<String>,
    /// The people a `waiting` agent waits for (the `to` of its open clarifies).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<String>,
    /// Since when (last output, exit or parking), when known.
    pub agent_since: Option<String>,
    /// What a `needs_input` / `blocked` agent's pane shows (daemon/pane.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_prompt: Option<String>,
    /// The options of that prompt's menu and the tmux keys choosing each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agent_options: Vec<Choice>,
    /// Why waiting work does not move ("agent dead", "waiting on clarify
    /// <id> to <role>", "wake deferred: busy"), when that is known.
    pub not_moving: Option<String>,
    /// The host of a role on another host (its queue here is the bridge's proxy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Why handoffd cannot deliver to this role (a symlinked inbox folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Since when the audit gate holds this role's git handoff back (not
    /// queued until the unchanged second call; agent::send::audit_gate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_pending_since: Option<String>,
    /// This role's git handoffs held for approval that keep it from taking
    /// new work (`WAITING_FOR_APPROVAL`, agent::guard; a project with cards,
    /// nothing in process).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_for_approval: Vec<PathBuf>,
    /// A headless agent's liveness from its activity file (`responding`,
    /// `listening`, `idle`, `dead`; telemetry/activity.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activity: Option<Liveness>,
}

#[derive(Debug, Serialize)]
pub struct Status {
    pub root: PathBuf,
    pub daemon_pid: Option<u32>,
    pub daemon_running: bool,
    pub roles: Vec<RoleStatus>,
    /// Open clarifies and items waiting for human roles.
    pub attention: Vec<attention::Item>,
    /// Lines of roles.tsv that were skipped.
    pub problems: Vec<String>,
    /// Why `.swarmforge/tmux-socket` cannot be believed (the file, the
    /// cause, the repair); the agents' liveness is then unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tmux_socket_problem: Option<String>,
    /// Items the bridge received for this host that wait (for their commit).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bridge_waiting: Vec<BridgeWaiting>,
    /// Copies received from other hosts that the daemon has not delivered
    /// yet, or refused (docs/bridge.md, "One deliverer").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub relayed: Vec<Relayed>,
    /// `swarm pause` in force (null when delivery runs).
    pub paused: Option<Pause>,
    /// Handoffs waiting for `swarm approve` / `swarm deny`.
    pub held: Vec<Held>,
    /// What is wrong in an approval folder (`pending_approval/`, or a
    /// file left in an old `held/`): `<path>: <why>` (person::holds::problems).
    pub approval_problems: Vec<String>,
    /// SwarmForge's rejected-task folders (review histories, what Delete
    /// kept; protocol::rejected_tasks).
    pub rejected_tasks: Vec<Kept>,
    /// What in `.swarmforge/rejected-tasks/` is not as upstream keeps it:
    /// `<path>: <why>`.
    pub rejected_problems: Vec<String>,
    /// Where SwarmForge's request files (clarifications, chat) say other
    /// than the messages they are derived from (protocol::dashboard).
    pub dashboard: Vec<String>,
    /// Pause state and controls across hosts (docs/bridge.md, "One control").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swarm_control: Option<SwarmControl>,
    /// File reservations in force (docs/reservations.md).
    pub reservations: Vec<Reservation>,
    /// Tokens and cost per role, and the roles a budget parks.
    pub spend: Spend,
    /// Today's SwarmForge's cards and their lanes (crates/swarm-records/src/board/), when the
    /// project declares card types.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub board: Option<board::View>,
    /// Confined agents' forum and board requests handoffd has not answered
    /// (forum/requests.rs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agent_requests: Vec<requests::Waiting>,
    /// Failed wake-ups handoffd will try again (`.swarmforge/daemon/wakeups/`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wake_retries: Vec<WakeRetry>,
}

/// A failed wake-up in the durable queue (protocol::wakeups).
#[derive(Debug, Serialize)]
pub struct WakeRetry {
    pub role: String,
    /// Failed attempts so far; 0 when the record does not read.
    pub attempt: u32,
    pub last_error: String,
    pub next_at: Option<String>,
    pub item: PathBuf,
}

fn wake_retries(project: &Project) -> Vec<WakeRetry> {
    wakeups::list(project)
        .into_iter()
        .map(|(role, p)| match p {
            Some(p) => WakeRetry {
                role,
                attempt: p.retry.attempt,
                last_error: p.retry.last_error,
                next_at: Some(clock::iso(p.retry.next_at)),
                item: p.item,
            },
            None => WakeRetry {
                last_error: "unreadable record (handoffd removes it)".into(),
                next_at: None,
                item: wakeups::file(project, &role),
                attempt: 0,
                role,
            },
        })
        .collect()
}

/// One received item the bridge holds back, and why (docs/bridge.md).
#[derive(Debug, Serialize)]
pub struct BridgeWaiting {
    pub name: String,
    pub role: String,
    pub reason: String,
}

/// A local role's relay folder, when it holds anything to look at.
#[derive(Debug, Serialize)]
pub struct Relayed {
    pub role: String,
    /// Received, not delivered yet (paused, retried, or in the next pass).
    pub waiting: usize,
    /// Refused by this host's daemon, each with a `.error` note beside it.
    pub failed: usize,
    pub failed_dir: PathBuf,
}

/// Every local role's relay folder that holds waiting or refused copies.
pub fn relayed(project: &Project, roles: &Roles) -> Vec<Relayed> {
    roles
        .roles
        .iter()
        .filter(|r| !r.is_remote())
        .filter_map(|r| {
            let wt = Worktree::new(project.bridge_relay(&r.name));
            let (waiting, failed) = (items(&wt.outbox()).0, items(&wt.failed()).0);
            (waiting + failed > 0).then(|| Relayed {
                role: r.name.clone(),
                waiting,
                failed,
                failed_dir: wt.failed(),
            })
        })
        .collect()
}

/// The bridge's notes (`.swarmforge/bridge/waiting/<name>`: `role<TAB>why`).
pub fn bridge_waiting(project: &Project) -> Vec<BridgeWaiting> {
    let mut v: Vec<BridgeWaiting> = store::each(&project.bridge_waiting())
        .filter_map(|e| {
            if !e.is_handoff_named() {
                return None;
            }
            let name = e.name;
            let text = read_bounded(&e.path, 64 * 1024).ok()?;
            let text = String::from_utf8_lossy(&text);
            let (role, reason) = text.trim_end().split_once('\t')?;
            Some(BridgeWaiting {
                name,
                role: role.to_string(),
                reason: reason.to_string(),
            })
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

pub fn collect(project: &Project) -> Result<Status> {
    // roles.tsv and swarm.yaml read once for the trail and the status.
    let swarm = Swarm::new(project.clone());
    let attention = attention::collect_in(&swarm)?;
    collect_in(&swarm, attention)
}

/// [`collect`] with the attention list at hand (the cockpit keeps it).
pub fn collect_with(project: &Project, attention: Vec<attention::Item>) -> Result<Status> {
    collect_in(&Swarm::new(project.clone()), attention)
}

/// [`collect_with`] in a loaded swarm.
fn collect_in(swarm: &Swarm, attention: Vec<attention::Item>) -> Result<Status> {
    let project = &swarm.project;
    let roles = swarm.roles()?;
    let pid = control::running_pid(project);
    let runner = Runner::in_swarm(swarm);
    // A config that does not load is reported elsewhere (doctor, up); the
    // status still shows the queues, read with the default limit.
    let max_file_bytes = swarm
        .config()
        .map_or(Limits::default().max_file_bytes, |c| {
            c.limits.max_file_bytes
        });
    let cards = board::Routes::load_in(swarm)
        .ok()
        .filter(|r| !r.is_empty())
        .is_some();
    let out = roles
        .roles
        .iter()
        .map(|r| {
            let at = RoleAt {
                project,
                roles,
                runner: &runner,
                attention: &attention,
                max_file_bytes,
                cards,
            };
            at.status(r)
        })
        .collect();
    let relayed = relayed(project, roles);
    let agent_requests = requests::waiting(project, roles);
    Ok(Status {
        root: project.root.clone(),
        daemon_running: pid.is_some(),
        daemon_pid: pid,
        roles: out,
        attention,
        problems: roles.problems.clone(),
        tmux_socket_problem: match &runner {
            Runner::Refused(why) => Some(why.clone()),
            _ => None,
        },
        bridge_waiting: bridge_waiting(project),
        relayed,
        paused: gate::pause_state(project),
        held: holds::list_in(swarm)?,
        approval_problems: holds::problems_in(swarm)
            .into_iter()
            .map(|p| format!("{}: {}", p.path.display(), p.why))
            .collect(),
        rejected_tasks: rejected_tasks::list(project),
        rejected_problems: rejected_tasks::problems(project)
            .into_iter()
            .map(|p| format!("{}: {}", p.path.display(), p.why))
            .collect(),
        dashboard: dashboard::check_in(swarm)
            .into_iter()
            .map(|d| d.line)
            .collect(),
        swarm_control: control_view::collect_in(swarm),
        reservations: reservations::active(project)?,
        spend: spend::collect_in(swarm),
        board: board::View::for_status(swarm),
        agent_requests,
        wake_retries: wake_retries(project),
    })
}

/// What one role's status is read against: the project, its lineup, the
/// agents' runner and the open attention items.
struct RoleAt<'a> {
    project: &'a Project,
    roles: &'a Roles,
    runner: &'a Runner,
    attention: &'a [attention::Item],
    max_file_bytes: u64,
    cards: bool,
}

impl RoleAt<'_> {
    /// One role's queue, its agent's liveness and why its work does not move.
    fn status(&self, r: &Role) -> RoleStatus {
        let (project, attention, max_file_bytes) =
            (self.project, self.attention, self.max_file_bytes);
        let wt = Worktree::new(&r.worktree_path);
        let (new, oldest) = waiting(&wt.inbox_new(), max_file_bytes);
        let ip = in_process(&wt.in_process());
        let last_wake = fs::read_to_string(wake::last_wake_file(project, &r.name))
            .ok()
            .map(|s| s.trim().to_string());
        let mut live = self.runner.liveness(project, r);
        let waiting_for = liveness::waiting_for(self.roles, r, ip.is_some(), attention, &mut live);
        let stuck = (new > 0 && ip.is_none())
            || attention
                .iter()
                .any(|a| a.kind == attention::Kind::Clarify && a.from == r.name);
        let not_moving = stuck
            .then(|| liveness::not_moving(project, r, live.as_ref(), attention))
            .flatten();
        RoleStatus {
            role: r.name.clone(),
            mode: r
                .receive_mode()
                .map(|m| m.as_str())
                .unwrap_or("invalid")
                .to_string(),
            human: r.is_human(),
            worktree: r.worktree_path.clone(),
            new,
            oldest_new_age_s: oldest.map(age),
            in_process_age_s: ip.as_ref().and_then(|(_, t)| t.map(age)),
            in_process: ip.map(|(p, _)| p),
            completed: completed_count(&wt.completed()),
            failed: items(&wt.failed()).0,
            outbox: items(&wt.outbox()).0,
            last_wake,
            agent_state: live.as_ref().map(|l| l.state),
            agent_reason: live.as_ref().and_then(|l| l.reason.clone()),
            waiting_for,
            agent_prompt: live.as_ref().and_then(|l| l.detail.clone()),
            agent_options: live.as_ref().map(|l| l.options.clone()).unwrap_or_default(),
            agent_since: live.and_then(|l| l.since),
            not_moving,
            host: r
                .is_remote()
                .then(|| r.worktree_name.trim_start_matches('@').to_string()),
            problem: wt
                .symlinked_inbox_folder()
                .map(|l| symlinked_inbox_reason(&l)),
            audit_pending_since: audit_pending::open_for(&wt, &r.name),
            waiting_for_approval: if self.cards {
                guard::held_blocking(&wt, &r.name, max_file_bytes)
            } else {
                Vec::new()
            },
            activity: activity::of_role(project, &r.name),
        }
    }
}
