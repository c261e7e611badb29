//! `swarm status`: the daemon and each role's queue, read from the files, and
//! what needs a person (open clarifies, items waiting for human roles).

use crate::protocol::header::names;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::daemon::control;
use crate::daemon::wake;
use crate::error::Result;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::store::{self, Entry, Kind};
use crate::views::attention;
use crate::views::liveness::{self, Runner};

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
    pub agent_options: Vec<crate::daemon::pane::Choice>,
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
    pub activity: Option<crate::telemetry::activity::Liveness>,
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
    pub paused: Option<crate::daemon::gate::Pause>,
    /// Handoffs waiting for `swarm approve` / `swarm deny`.
    pub held: Vec<crate::person::holds::Held>,
    /// What is wrong in an approval folder (`pending_approval/`, or a
    /// file left in an old `held/`): `<path>: <why>` (person::holds::problems).
    pub approval_problems: Vec<String>,
    /// SwarmForge's rejected-task folders (review histories, what Delete
    /// kept; protocol::rejected_tasks).
    pub rejected_tasks: Vec<crate::protocol::rejected_tasks::Kept>,
    /// What in `.swarmforge/rejected-tasks/` is not as upstream keeps it:
    /// `<path>: <why>`.
    pub rejected_problems: Vec<String>,
    /// Where SwarmForge's request files (clarifications, chat) say other
    /// than the messages they are derived from (protocol::dashboard).
    pub dashboard: Vec<String>,
    /// Pause state and controls across hosts (docs/bridge.md, "One control").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swarm_control: Option<crate::bridge::control_view::SwarmControl>,
    /// File reservations in force (docs/reservations.md).
    pub reservations: Vec<crate::reservations::Reservation>,
    /// Tokens and cost per role, and the roles a budget parks.
    pub spend: crate::telemetry::spend::Spend,
    /// Today's SwarmForge's cards and their lanes (src/board/), when the
    /// project declares card types.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub board: Option<crate::board::View>,
    /// Confined agents' forum and board requests handoffd has not answered
    /// (forum/requests.rs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agent_requests: Vec<crate::forum::requests::Waiting>,
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
    crate::protocol::wakeups::list(project)
        .into_iter()
        .map(|(role, p)| match p {
            Some(p) => WakeRetry {
                role,
                attempt: p.retry.attempt,
                last_error: p.retry.last_error,
                next_at: Some(crate::protocol::clock::iso(p.retry.next_at)),
                item: p.item,
            },
            None => WakeRetry {
                last_error: "unreadable record (handoffd removes it)".into(),
                next_at: None,
                item: crate::protocol::wakeups::file(project, &role),
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
pub fn relayed(project: &Project, roles: &crate::protocol::roles::Roles) -> Vec<Relayed> {
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
            let text = crate::fsx::read_bounded(&e.path, 64 * 1024).ok()?;
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

fn age(t: SystemTime) -> u64 {
    SystemTime::now()
        .duration_since(t)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// Since when a copy in `inbox/new` has waited: its `enqueued_at`, the one
/// definition `swarm audit` uses too; its mtime only for a copy without a
/// readable stamp (a file planted by hand), since a copy, a backup or `touch`
/// changes the mtime. Read up to the copy limit of `limits.max_file_bytes`.
pub(crate) fn waiting_since(
    path: &Path,
    mtime: Option<SystemTime>,
    max_file_bytes: u64,
) -> Option<SystemTime> {
    crate::fsx::read_bounded(path, store::copy_limit(max_file_bytes))
        .ok()
        .and_then(|b| crate::protocol::header::Message::parse_bytes(&b).ok())
        .and_then(|m| {
            m.get(names::ENQUEUED_AT)
                .and_then(crate::protocol::clock::parse)
        })
        .map(SystemTime::from)
        .or(mtime)
}

/// (count of waiting items, since when the oldest has waited) in `new/`.
pub(crate) fn waiting(dir: &Path, max_file_bytes: u64) -> (usize, Option<SystemTime>) {
    count_oldest(dir, |e| {
        waiting_since(&e.path, e.modified(), max_file_bytes)
    })
}

/// (count of items, oldest mtime) directly in `dir`.
pub(crate) fn items(dir: &Path) -> (usize, Option<SystemTime>) {
    count_oldest(dir, Entry::modified)
}

/// (count of items, the earliest `since` of them) directly in `dir`.
fn count_oldest(
    dir: &Path,
    since: impl Fn(&Entry) -> Option<SystemTime>,
) -> (usize, Option<SystemTime>) {
    let mut n = 0;
    let mut oldest: Option<SystemTime> = None;
    each_entry(dir, |e| {
        if !e.is_handoff_named() {
            return;
        }
        n += 1;
        if let Some(t) = since(&e) {
            oldest = Some(oldest.map_or(t, |o| o.min(t)));
        }
    });
    (n, oldest)
}

/// Calls `f` with each entry of the queue folder `dir` (none when it cannot
/// be listed): the views' one listing of a queue folder, through the store.
pub(crate) fn each_entry(dir: &Path, f: impl FnMut(Entry)) {
    store::each(dir).for_each(f);
}

fn completed_count(dir: &Path) -> usize {
    store::each(dir)
        .map(|e| match e.kind {
            Kind::Handoff | Kind::Odd => 1,
            Kind::Batch => items(&e.path).0,
            Kind::Sidecar | Kind::Temp | Kind::Stray => 0,
        })
        .sum()
}

/// The entry in process (an item or a batch folder; the first by name
/// should there be more, as the cockpit's `Folders::first`) and its mtime.
pub(crate) fn in_process(dir: &Path) -> Option<(PathBuf, Option<SystemTime>)> {
    store::each(dir)
        .filter(|e| e.is_handoff_named() || e.kind == Kind::Batch)
        .min_by(|a, b| a.path.cmp(&b.path))
        .map(|e| {
            let at = e.modified();
            (e.path, at)
        })
}

pub fn collect(project: &Project) -> Result<Status> {
    collect_with(project, attention::collect(project)?)
}

/// [`collect`] with the attention list at hand (the cockpit keeps it).
pub fn collect_with(project: &Project, attention: Vec<attention::Item>) -> Result<Status> {
    let roles = Roles::load(&project.roles_tsv())?;
    let pid = control::running_pid(project);
    let runner = Runner::of(project);
    // A config that does not load is reported elsewhere (doctor, up); the
    // status still shows the queues, read with the default limit.
    let max_file_bytes = crate::protocol::config::Limits::max_file_bytes_of(&project.config_file());
    let cards = crate::board::Routes::for_place(Some(project)).is_some();
    let mut out = Vec::new();
    for r in &roles.roles {
        let wt = Worktree::new(&r.worktree_path);
        let (new, oldest) = waiting(&wt.inbox_new(), max_file_bytes);
        let ip = in_process(&wt.in_process());
        let last_wake = fs::read_to_string(wake::last_wake_file(project, &r.name))
            .ok()
            .map(|s| s.trim().to_string());
        let mut live = runner.liveness(project, r);
        let waiting_for = liveness::waiting_for(&roles, r, ip.is_some(), &attention, &mut live);
        let stuck = (new > 0 && ip.is_none())
            || attention
                .iter()
                .any(|a| a.kind == attention::Kind::Clarify && a.from == r.name);
        let not_moving = stuck
            .then(|| liveness::not_moving(project, r, live.as_ref(), &attention))
            .flatten();
        out.push(RoleStatus {
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
                .map(|l| crate::protocol::layout::symlinked_inbox_reason(&l)),
            audit_pending_since: crate::protocol::audit_pending::open_for(&wt, &r.name),
            waiting_for_approval: if cards {
                crate::agent::guard::held_blocking(&wt, &r.name, max_file_bytes)
            } else {
                Vec::new()
            },
            activity: crate::telemetry::activity::of_role(project, &r.name),
        });
    }
    let relayed = relayed(project, &roles);
    let agent_requests = crate::forum::requests::waiting(project, &roles);
    Ok(Status {
        root: project.root.clone(),
        daemon_running: pid.is_some(),
        daemon_pid: pid,
        roles: out,
        attention,
        problems: roles.problems,
        tmux_socket_problem: match &runner {
            Runner::Refused(why) => Some(why.clone()),
            _ => None,
        },
        bridge_waiting: bridge_waiting(project),
        relayed,
        paused: crate::daemon::gate::pause_state(project),
        held: crate::person::holds::list(project)?,
        approval_problems: crate::person::holds::problems(project)
            .into_iter()
            .map(|p| format!("{}: {}", p.path.display(), p.why))
            .collect(),
        rejected_tasks: crate::protocol::rejected_tasks::list(project),
        rejected_problems: crate::protocol::rejected_tasks::problems(project)
            .into_iter()
            .map(|p| format!("{}: {}", p.path.display(), p.why))
            .collect(),
        dashboard: crate::protocol::dashboard::check(project)
            .into_iter()
            .map(|d| d.line)
            .collect(),
        swarm_control: crate::bridge::control_view::collect(project),
        reservations: crate::reservations::active(project)?,
        spend: crate::telemetry::spend::collect(project),
        board: crate::board::View::for_status(project),
        agent_requests,
        wake_retries: wake_retries(project),
    })
}

fn secs(s: Option<u64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s < 120 => format!("{s}s"),
        Some(s) if s < 7200 => format!("{}m", s / 60),
        Some(s) => format!("{}h", s / 3600),
    }
}

pub fn text(s: &Status) -> String {
    let mut out = match s.daemon_pid {
        Some(pid) => format!("handoffd: running (pid {pid}) for {}\n", s.root.display()),
        None => format!("handoffd: not running for {}\n", s.root.display()),
    };
    out.push_str(&format!(
        "{:<16} {:<5} {:>5} {:>7} {:<24} {:>7} {:>9} {:>6} {:>6}  {}\n",
        "ROLE",
        "MODE",
        "NEW",
        "OLDEST",
        "IN_PROCESS",
        "AGE",
        "COMPLETED",
        "FAILED",
        "OUTBOX",
        "LAST_WAKE"
    ));
    for r in &s.roles {
        let ip = r
            .in_process
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|n| {
                let n = n.to_string_lossy();
                // By characters: a planted non-ASCII name must not split a code point.
                if n.chars().count() > 24 {
                    format!("{}…", n.chars().take(23).collect::<String>())
                } else {
                    n.into_owned()
                }
            })
            .unwrap_or_else(|| "-".into());
        let name = if let Some(h) = &r.host {
            format!("{} (@{h})", r.role)
        } else if r.human {
            format!("{} (human)", r.role)
        } else {
            r.role.clone()
        };
        out.push_str(&format!(
            "{:<16} {:<5} {:>5} {:>7} {:<24} {:>7} {:>9} {:>6} {:>6}  {}\n",
            name,
            r.mode,
            r.new,
            secs(r.oldest_new_age_s),
            ip,
            secs(r.in_process_age_s),
            r.completed,
            r.failed,
            r.outbox,
            r.last_wake.as_deref().unwrap_or("-")
        ));
    }
    for r in &s.roles {
        if let Some(a) = r.activity {
            out.push_str(&format!("{}: activity {}\n", r.role, a.word()));
        }
        if let Some(st) = r.agent_state {
            out.push_str(&format!("{}: agent {}", r.role, st.word()));
            if !r.waiting_for.is_empty() {
                out.push_str(&format!(" for {}", r.waiting_for.join(", ")));
            }
            if let Some(t) = &r.agent_since {
                out.push_str(&format!(" since {t}"));
            }
            if let Some(why) = &r.agent_reason {
                // Escaped already (start_failure::Death::reason).
                out.push_str(&format!(": {why}"));
            }
            match (&r.agent_prompt, r.agent_options.is_empty()) {
                (Some(p), true) => out.push_str(&format!(": {p} (swarm attach {})", r.role)),
                // Each option by the number that chooses it.
                (Some(p), false) => out.push_str(&format!(
                    ": {p}; options: {} (swarm attach {} --choose N)",
                    crate::daemon::pane::numbered_options(&r.agent_options),
                    r.role
                )),
                (None, _) => {}
            }
            if let Some(w) = r.not_moving.as_ref().filter(|_| r.agent_prompt.is_none()) {
                out.push_str(&format!("; not moving: {}", crate::text::escape(w)));
            }
            out.push('\n');
        } else if let Some(w) = &r.not_moving {
            out.push_str(&format!(
                "{}: not moving: {}\n",
                r.role,
                crate::text::escape(w)
            ));
        }
    }
    for r in s.roles.iter() {
        if let Some(p) = &r.problem {
            out.push_str(&format!("{}: {}\n", r.role, crate::text::escape(p)));
        }
    }
    for w in &s.bridge_waiting {
        out.push_str(&format!(
            "waiting on the bridge: {} for {}: {}\n",
            crate::text::escape(&w.name),
            w.role,
            crate::text::escape(&w.reason)
        ));
    }
    for r in &s.relayed {
        out.push_str(&format!(
            "from other hosts for {}: {} waiting for delivery",
            r.role, r.waiting
        ));
        if r.failed > 0 {
            out.push_str(&format!(
                ", {} refused (reasons in {})",
                r.failed,
                r.failed_dir.display()
            ));
        }
        out.push('\n');
    }
    if let Some(p) = &s.paused {
        out.push_str(&format!(
            "PAUSED: {} since {} (swarm resume)\n",
            p.describe(),
            p.since
        ));
    }
    if let Some(c) = &s.swarm_control {
        out.push_str(&crate::bridge::control_view::text(c));
    }
    for r in &s.roles {
        if let Some(t) = &r.audit_pending_since {
            out.push_str(&format!(
                "audit gate: {}'s git_handoff is not queued (challenged at {t}); it is queued when {} runs swarm-handoff again on the unchanged draft, and until then {} neither finishes its item nor takes a new one (AUDIT_PENDING)\n",
                r.role, r.role, r.role
            ));
        }
    }
    for r in &s.roles {
        for f in &r.waiting_for_approval {
            out.push_str(&format!(
                "waiting for approval: {} takes no new item until its held git_handoff {} is approved or denied (WAITING_FOR_APPROVAL)\n",
                r.role,
                crate::text::escape(&f.display().to_string())
            ));
        }
    }
    if let Some(b) = &s.board {
        out.push_str(&crate::board::text(b));
    }
    for w in &s.agent_requests {
        out.push_str(&format!(
            "requests: {} has {} forum/board request(s) handoffd has not taken and {} taken but not answered (is handoffd running?)\n",
            w.role, w.asked, w.taken
        ));
    }
    for w in &s.wake_retries {
        out.push_str(&format!(
            "wake retry: {} failed {} time(s), last: {}; handoffd tries again at {}\n",
            crate::text::escape(&w.role),
            w.attempt,
            crate::text::escape(&w.last_error),
            w.next_at.as_deref().unwrap_or("-")
        ));
    }
    for h in &s.held {
        out.push_str(&format!(
            "held {} {} -> {} ({}), {}: swarm approve {} | swarm deny {} --reason R\n",
            crate::text::escape(&h.kind),
            crate::text::escape(&h.from),
            crate::text::escape(&h.to),
            crate::text::escape(h.title.as_deref().unwrap_or("-")),
            secs(h.age_s),
            h.id,
            h.id
        ));
    }
    for p in &s.approval_problems {
        out.push_str(&format!("approvals: NOT OK: {}\n", crate::text::escape(p)));
    }
    for k in &s.rejected_tasks {
        let comments: usize = k.history.values().map(Vec::len).sum();
        let mut line = format!(
            "rejected: {}: {comments} review comment(s) on {} document(s)",
            crate::text::escape(&k.task_id),
            k.history.len()
        );
        if !k.archived.is_empty() {
            line.push_str(&format!(", {} file(s) kept by Delete", k.archived.len()));
        }
        out.push_str(&format!("{line} ({})\n", k.dir.display()));
    }
    for p in &s.rejected_problems {
        out.push_str(&format!(
            "rejected-tasks: NOT OK: {}\n",
            crate::text::escape(p)
        ));
    }
    for d in &s.dashboard {
        out.push_str(&format!(
            "dashboard: NOT IN STEP: {}\n",
            crate::text::escape(d)
        ));
    }
    for r in &s.reservations {
        out.push_str(&format!("reserved: {}\n", r.describe()));
    }
    out.push_str(&crate::telemetry::spend::text(&s.spend));
    out.push_str(&attention::text(&s.attention));
    for p in &s.problems {
        out.push_str(&format!("roles.tsv: {p}\n"));
    }
    if let Some(p) = &s.tmux_socket_problem {
        out.push_str(&format!("{p}\n"));
    }
    out
}
