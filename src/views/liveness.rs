//! Whether each role's agent is `busy`, `idle`, `dead` or `parked`, since
//! when, and why a role with waiting work is not moving (`swarm status`).
//!
//! With tmux: a missing session or a pane whose agent exited (the pane
//! script's state file) is dead; otherwise the window's last output time
//! tells busy (output within the quiet window) from idle. Headless: a
//! running agent process is busy, a parked role parked, else idle. No swarm
//! running: unknown.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::daemon::{tmux, wake};
use crate::fsx;
use crate::protocol::config::Config;
use crate::protocol::launch_files::{
    agent_parked_file, agent_pid_file, agent_state_file, supervisor_pid_file,
};
use crate::protocol::layout::Project;
use crate::protocol::roles::Role;
use crate::views::attention;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Busy,
    Idle,
    Dead,
    Parked,
}

impl State {
    pub fn word(self) -> &'static str {
        match self {
            State::Busy => "busy",
            State::Idle => "idle",
            State::Dead => "dead",
            State::Parked => "parked",
        }
    }
}

/// One agent's liveness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Liveness {
    pub state: State,
    /// ISO time: last output (busy, idle), exit or death (dead), parking.
    pub since: Option<String>,
}

/// How the swarm runs, looked up once per `swarm status`.
pub enum Runner {
    Tmux { socket: PathBuf, quiet: Duration },
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
        if let Some(sock) = read_small(&project.tmux_socket()) {
            let quiet = Config::load(&project.config_file())
                .map(|c| c.wake.quiet.0)
                .unwrap_or(Duration::from_secs(1));
            return Runner::Tmux {
                socket: PathBuf::from(sock),
                quiet,
            };
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
            Runner::None => None,
            Runner::Headless => {
                if let Some(t) = read_small(&agent_parked_file(project, &r.name)) {
                    return Some(Liveness {
                        state: State::Parked,
                        since: Some(t),
                    });
                }
                let running = agent_pid_file(project, &r.name).exists();
                Some(Liveness {
                    state: if running { State::Busy } else { State::Idle },
                    since: None,
                })
            }
            Runner::Tmux { socket, quiet } => {
                let state = read_small(&agent_state_file(project, &r.name)).unwrap_or_default();
                let mut words = state.split_whitespace();
                let exited = words.next() == Some("exited");
                let stamp = |w: Option<&str>| w.and_then(|t| t.parse().ok()).map(iso_of_epoch);
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
                        return Some(Liveness {
                            state: State::Dead,
                            since,
                        });
                    }
                };
                if exited {
                    return Some(Liveness {
                        state: State::Dead,
                        since: stamp(state.split_whitespace().nth(2)),
                    });
                }
                let Some(at) = activity else {
                    return Some(Liveness {
                        state: State::Idle,
                        since: None,
                    });
                };
                // Output within two quiet windows (at least 2 s, the clock's
                // resolution here) counts as busy.
                let window = (quiet.as_secs() * 2).max(2);
                let busy = now_epoch().saturating_sub(at) < window;
                Some(Liveness {
                    state: if busy { State::Busy } else { State::Idle },
                    since: Some(iso_of_epoch(at)),
                })
            }
        }
    }
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
    match live.map(|l| l.state) {
        Some(State::Dead) => return Some("agent dead".into()),
        Some(State::Parked) => {
            return Some("agent parked after runs that left the queue untouched".into())
        }
        _ => {}
    }
    if wake::deferred_file(project, &r.name).exists() {
        return Some("wake deferred: busy".into());
    }
    None
}
