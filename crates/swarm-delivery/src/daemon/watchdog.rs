//! The agent watchdog (vibex): items kept in process past `complete_within`
//! are reported once each (`expectation_violated`), and a role with
//! `restart: true` whose tmux session is gone is restarted under a per-role
//! lock, at most `restart_budget` times an hour, on `ready-next
//! --resume-context 20`. A dead or slow agent never stops another role.

use crate::protocol::header::names;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::daemon::journal::{Event, Journal, Kind};
use crate::daemon::wake;
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::config::{Config, MAX_CONFIG_BYTES};
use crate::protocol::header::Message;
use crate::protocol::launch_files::{sessions_file, AgentRun};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::{Role, Roles};
use crate::protocol::store::{self, Kind as Entry};
use crate::sys::shell;
use crate::sys::tmux::TmuxError;

/// Transcript lines a restarted agent is shown.
pub const RESUME_LINES: u32 = 20;

fn marker_dir(project: &Project) -> PathBuf {
    project.daemon_dir().join("expectations")
}

/// The in-process item (file, or first file of the batch) and its `dequeued_at`.
fn in_process(wt: &Worktree, max_file_bytes: u64) -> Option<(PathBuf, String)> {
    let (p, m) = in_process_message(wt, max_file_bytes)?;
    let at = m.get(names::DEQUEUED_AT)?.to_string();
    Some((p, at))
}

/// The in-process entry (a file, or a batch folder) and the message of
/// that file or of the batch's first file, read with the copy limit of
/// `limits.max_file_bytes`; also what a headless turn is working on
/// (launch/turn/).
pub fn in_process_message(wt: &Worktree, max_file_bytes: u64) -> Option<(PathBuf, Message)> {
    let limit = store::copy_limit(max_file_bytes);
    for e in store::scan(&wt.in_process()).all() {
        let file = match e.kind {
            Entry::Batch => store::scan(&e.path).named().next()?.clone(),
            Entry::Handoff | Entry::Odd => e.clone(),
            Entry::Sidecar | Entry::Temp | Entry::Stray => continue,
        };
        return Some((e.path.clone(), file.message(limit)?));
    }
    None
}

/// Reports items in process longer than the role's `complete_within`, once
/// per item (a marker file keeps "once" across restarts).
pub fn check_expectations(project: &Project, roles: &Roles, config: &Config, journal: &Journal) {
    // Roles sharing a worktree share its inbox: its item is judged once, by
    // the first of them with a limit.
    let mut seen: std::collections::HashSet<&Path> = Default::default();
    for role in &roles.roles {
        let Some(limit) = config
            .role(&role.name)
            .and_then(|r| r.complete_within)
            .or(config.daemon.complete_within)
        else {
            continue;
        };
        // A set: a list made this quadratic in the number of roles.
        if !seen.insert(role.worktree_path.as_path()) {
            continue;
        }
        let wt = Worktree::new(&role.worktree_path);
        let Some((item, dequeued)) = in_process(&wt, config.limits.max_file_bytes) else {
            continue;
        };
        let Some(t) = clock::parse(&dequeued) else {
            continue;
        };
        let age = (clock::now() - t).to_std().unwrap_or_default();
        if age <= limit.0 {
            continue;
        }
        let name = item
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let marker = marker_dir(project).join(format!("{}__{name}", role.name));
        if marker.exists() {
            continue;
        }
        let dir = marker_dir(project);
        if fsx::ensure_dirs(&[&dir]).is_err() || fsx::write_file(&marker, b"").is_err() {
            continue;
        }
        journal.record(
            &Event::new(Kind::ExpectationViolated)
                .recipient(&role.name)
                .path(&item)
                .reason(format!("complete_within {limit}")),
        );
    }
}

fn tmux(socket: &Path, args: &[&str]) -> bool {
    crate::sys::tmux::ok(socket, args)
}

fn restarts_file(project: &Project, role: &str) -> PathBuf {
    project.daemon_dir().join("restarts").join(role)
}

/// Restarts done in the last hour, per the role's restart log.
pub fn restarts_last_hour(project: &Project, role: &str) -> usize {
    let Ok(text) = fsx::read_bounded(&restarts_file(project, role), MAX_CONFIG_BYTES)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
    else {
        return 0;
    };
    text.lines()
        .filter_map(|l| clock::parse(l.trim()))
        .filter(|t| (clock::now() - *t).num_seconds() < 3600)
        .count()
}

/// What the last look at the agents' panes saw: each session's last
/// drawing time (tmux's `window_activity`, whole seconds), so a pane that
/// drew nothing since its last capture is not captured again. Looking
/// every `daemon.pane_check` (2 s) then costs one `tmux list-panes` for the
/// whole swarm, plus a capture per pane that changed (docs/agents.md, "When
/// an agent waits for a person").
#[derive(Debug, Default)]
pub struct PaneLooks {
    captured_at_activity: HashMap<String, u64>,
}

impl PaneLooks {
    /// Whether `session`, last drawn at `activity`, must be captured now: it
    /// drew since its last capture, or within the last two seconds (tmux
    /// counts whole seconds, so more may have come in the same second).
    fn due(&self, session: &str, activity: Option<u64>, now: u64) -> bool {
        match (activity, self.captured_at_activity.get(session)) {
            (Some(a), Some(seen)) => a != *seen || a + 2 >= now,
            _ => true,
        }
    }
}

/// Each tmux session on `socket` and its last activity (None: tmux did not
/// say); empty when no server runs there. Err when tmux could not be asked
/// (hung, not installed): that says nothing about the sessions.
fn sessions(socket: &Path) -> Result<HashMap<String, Option<u64>>, TmuxError> {
    let r = crate::sys::tmux::call(
        socket,
        // Activity first, then a space: tmux prints a tab as `_` without a
        // UTF-8 locale (the daemon's environment may have none), and the
        // name is the rest of the line.
        &[
            "list-panes",
            "-a",
            "-F",
            "#{window_activity} #{session_name}",
        ],
    )?;
    if !r.ok {
        return Ok(HashMap::new());
    }
    Ok(r.stdout
        .lines()
        .filter_map(|l| {
            let (at, name) = l.split_once(' ')?;
            Some((name.to_string(), at.trim().parse().ok()))
        })
        .collect())
}

/// Looks at every agent's session and pane: reports a pane waiting for a
/// person (`needs_input` / `blocked`), an agent that died, and restarts a
/// `restart: true` role whose session is gone.
pub fn check_agents(
    project: &Project,
    roles: &Roles,
    config: &Config,
    journal: &Journal,
    looks: &mut PaneLooks,
) {
    let wake::Method::Tmux { socket } = wake::method(project, config) else {
        return;
    };
    let Ok(live) = sessions(&socket) else {
        return;
    };
    let now = u64::try_from(clock::now().timestamp()).unwrap_or(0);
    // Sessions `swarm up` started (so a session not yet created is not dead).
    let started = fsx::read_bounded(&sessions_file(project), MAX_CONFIG_BYTES)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    for role in &roles.roles {
        if role.is_human() || role.session.is_empty() {
            continue;
        }
        let activity = live.get(&role.session).copied();
        let has_session = activity.is_some();
        // The pane outlives its agent (it waits for a wake-up to run it
        // again); the pane script's state file says it exited, and how.
        // Exit 0 is the documented end of a scripted agent's run: idle.
        let run = AgentRun::of(project, &role.name);
        let code = match &run {
            Some(AgentRun::Exited { status, .. }) => Some(status.clone()),
            _ => None,
        };
        let exited = code.is_some();
        // A pane waiting for a person: reported once per prompt.
        let seen = if !has_session || exited {
            Some(Ok(None))
        } else if looks.due(&role.session, activity.flatten(), now) {
            Some(crate::daemon::pane::look(&socket, &role.session))
        } else {
            None
        };
        // Not looked at (nothing drawn), or tmux could not be read: the
        // last report stands.
        if let Some(Ok(seen)) = seen {
            crate::daemon::pane::report(project, &role.name, seen.as_ref(), journal);
            match activity.flatten() {
                Some(a) if has_session => {
                    looks.captured_at_activity.insert(role.session.clone(), a);
                }
                _ => {
                    looks.captured_at_activity.remove(&role.session);
                }
            }
        }
        match config.role(&role.name).filter(|r| r.restart) {
            Some(rc) if !has_session => restart(project, role, rc.restart_budget, &socket, journal),
            Some(_) => {}
            None => {
                let failed = run.as_ref().is_some_and(AgentRun::failed);
                let launched = started
                    .lines()
                    .any(|l| l.split('\t').nth(2) == Some(role.session.as_str()));
                let why = match code {
                    Some(c) if has_session => format!("its agent exited with status {c}"),
                    _ => "its session is gone".to_string(),
                };
                let alive = has_session && !failed;
                report_dead(project, role, alive || !launched, &why, journal);
            }
        }
    }
}

/// `agent_dead` once per death (a marker file keeps "once" across sweeps
/// and daemon restarts; it goes when the session is back).
fn report_dead(project: &Project, role: &Role, alive: bool, why: &str, journal: &Journal) {
    let dir = project.daemon_dir().join("dead");
    let marker = dir.join(&role.name);
    if alive {
        if marker.exists() {
            let _ = fsx::remove_file(&marker);
        }
        return;
    }
    if marker.exists() || fsx::ensure_dirs(&[&dir]).is_err() {
        return;
    }
    if fsx::write_file(&marker, format!("{}\n", clock::iso_now()).as_bytes()).is_ok() {
        journal.record(
            &Event::new(Kind::AgentDead)
                .recipient(&role.name)
                .reason(format!("{why} (session {})", role.session)),
        );
    }
}

fn restart(project: &Project, role: &Role, budget: u32, socket: &Path, journal: &Journal) {
    let dir = project.daemon_dir().join("restarts");
    if fsx::ensure_dirs(&[&dir]).is_err() {
        return;
    }
    // One restart at a time per role, even across daemons and `swarm up`.
    let Ok(Some(_lock)) = fsx::try_lock(&dir.join(format!("{}.flock", role.name))) else {
        return;
    };
    let used = restarts_last_hour(project, &role.name);
    let script = project
        .swarmforge()
        .join("run")
        .join(format!("{}.sh", role.name));
    let reason = if used >= budget as usize {
        Some(format!(
            "restart budget used ({used}/{budget} in the last hour)"
        ))
    } else if !script.is_file() {
        Some(format!("no launch script {}", script.display()))
    } else {
        None
    };
    if let Some(reason) = reason {
        // Log a refused restart once per hour-window state change, not every sweep.
        let marker = dir.join(format!("{}.refused", role.name));
        if !marker.exists() {
            let _ = fsx::write_file(&marker, reason.as_bytes());
            journal.record(
                &Event::new(Kind::NotifyFailed)
                    .recipient(&role.name)
                    .reason(reason),
            );
        }
        return;
    }
    let _ = fsx::remove_file(&dir.join(format!("{}.refused", role.name)));
    let bin_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let cmd = format!(
        "export SWARMFORGE_ROLE={}; export PATH={}:\"$PATH\"; ready-next --resume-context {RESUME_LINES}; exec sh {}",
        shell::quote(&role.name),
        shell::quote_path(&bin_dir),
        shell::quote_path(&script)
    );
    let ok = tmux(
        socket,
        &[
            "new-session",
            "-d",
            "-s",
            &role.session,
            "-c",
            &role.worktree_path.to_string_lossy(),
            &cmd,
        ],
    );
    let _ = fsx::append(
        &restarts_file(project, &role.name),
        format!("{}\n", clock::iso_now()).as_bytes(),
    );
    let ev = Event::new(if ok {
        Kind::Restarted
    } else {
        Kind::NotifyFailed
    })
    .recipient(&role.name);
    journal.record(&if ok {
        ev.reason(format!("session {} was gone", role.session))
    } else {
        ev.reason(format!("cannot restart session {}", role.session))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pane_is_captured_again_only_when_it_drew_or_may_still_be_drawing() {
        let mut looks = PaneLooks::default();
        assert!(looks.due("s", Some(100), 200), "never captured");
        assert!(looks.due("s", None, 200), "tmux gave no activity");
        looks.captured_at_activity.insert("s".into(), 100);
        assert!(!looks.due("s", Some(100), 200), "nothing drawn since");
        assert!(looks.due("s", Some(101), 200), "drew since");
        // Whole seconds: more may have come in the capture's own second.
        assert!(looks.due("s", Some(100), 102));
        assert!(!looks.due("s", Some(100), 103));
    }
}
