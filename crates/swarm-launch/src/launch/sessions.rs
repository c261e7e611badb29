//! One tmux session per role on the swarm's socket: the pane script, the
//! prompts, starting and stopping them.

use std::path::Path;
use std::time::{Duration, Instant};

use super::GRACE;
use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::launch::plan::{Plan, PlannedRole};
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::protocol::tmux_socket::{self, Pointer};

use super::command::{agent_command, env_prelude};
use super::process::stop_groups;
use crate::protocol::launch_files::{agent_state_file, run_file, sessions_file, tmux_env_file};
use crate::sys::shell::{quote as sq, quote_path as sqp};
use crate::sys::tmux::{self, ok as tmux_ok};

pub(crate) fn has_session(sock: &Path, session: &str) -> bool {
    tmux_ok(sock, &["has-session", "-t", &format!("={session}")])
}

/// What a role's pane runs: the agent in a loop that waits for a line (the
/// daemon's wake-up) between runs; for a person, their shell.
pub(super) fn pane_script(plan: &Plan, r: &PlannedRole) -> Result<String> {
    let project = &plan.project;
    let mut s = format!(
        "# Written by `swarm up`: role {} in its worktree.\n",
        r.name
    );
    s.push_str(&env_prelude(project, &plan.config, r)?);
    let cmd = match agent_command(project, &plan.config, r) {
        Some(c) => Some(crate::launch::confine::wrap_agent(plan, r, &c)?),
        None => None,
    };
    match cmd {
        None => s.push_str("exec \"${SHELL:-/bin/sh}\"\n"),
        // `$1`: seconds to wait first (the launch stagger), so every
        // session exists at once and no early wake-up misses its target.
        // The state file (`running <t>` / `exited <status> <t>`) tells
        // `swarm status` whether the agent runs; temp + rename, so a reader
        // never sees half a line.
        Some(cmd) => s.push_str(&format!(
            "state={st}\nmark() {{ printf '%s %s\\n' \"$1\" \"$(date +%s)\" >\"$state.tmp\" && mv -f \"$state.tmp\" \"$state\"; }}\n[ -n \"${{1:-}}\" ] && sleep \"$1\"\nwhile :; do\nmark running\n{cmd}\nstatus=$?\nmark \"exited $status\"\nprintf '\\n[swarm] the agent of role %s exited (status %s). A wake-up (Enter) runs it again; Ctrl-D closes this window.\\n' {} \"$status\"\nread -r _ || break\ndone\n",
            sq(&r.name),
            st = sqp(&agent_state_file(project, &r.name)),
        )),
    }
    Ok(s)
}

/// Prompt files, instruction blocks and turn-end hooks (agents/setup.rs).
pub(crate) fn write_prompts(plan: &Plan) -> Result<Vec<String>> {
    crate::launch::agents::setup::prepare(plan, &crate::launch::shims::own_bin_dir()?)
}

/// Creates the missing sessions at once; the n-th new agent waits
/// n × `stagger` inside its pane before it starts. Returns the new roles.
pub(crate) fn start_sessions(
    plan: &Plan,
    sock: &Path,
    stagger: Duration,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<String>> {
    let project = &plan.project;
    let mut started = Vec::new();
    let mut agents = 0u32;
    for r in &plan.roles {
        if has_session(sock, &r.session) {
            say(&format!(
                "{}: session {} already runs; kept",
                r.name, r.session
            ));
            continue;
        }
        let file = run_file(project, &r.name);
        crate::launch::repo::write_if_changed(&file, pane_script(plan, r)?.as_bytes())?;
        // An earlier run's `exited` must not pass for this one's
        // (supervisor::watch_start, `swarm status`).
        let state = agent_state_file(project, &r.name);
        fsx::remove_file(&state).at(&state)?;
        let wt = r.workdir().to_string_lossy().into_owned();
        let mut run = format!("sh {}", sqp(&file));
        if !r.is_human() {
            let delay = stagger * agents;
            agents += 1;
            if !delay.is_zero() {
                run.push_str(&format!(
                    " {}.{:03}",
                    delay.as_secs(),
                    delay.subsec_millis()
                ));
            }
        }
        let o = tmux::call(
            sock,
            &[
                "new-session",
                "-d",
                "-s",
                &r.session,
                "-n",
                &r.display,
                "-c",
                &wt,
                &run,
            ],
        )
        .map_err(Error::process)?;
        if !o.ok {
            return Err(Error::process(format!(
                "tmux could not create session {} on {}: {}",
                r.session,
                sock.display(),
                o.stderr.trim()
            )));
        }
        say(&format!(
            "{}: started in tmux session {}",
            r.name, r.session
        ));
        started.push(r.name.clone());
    }
    Ok(started)
}

pub(crate) fn write_session_files(plan: &Plan, sock: &Path) -> Result<()> {
    let mut tsv = String::new();
    for (i, r) in plan.roles.iter().enumerate() {
        tsv.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            i + 1,
            r.name,
            r.session,
            r.display,
            r.agent.column()
        ));
    }
    crate::launch::repo::write_if_changed(&sessions_file(&plan.project), tsv.as_bytes())?;
    if let Some(first) = plan.roles.first() {
        if let Ok(o) = tmux::call(
            sock,
            &[
                "display-message",
                "-p",
                "-t",
                &format!("={}", first.session),
                "#{socket_path},#{pid},#{pane_id}",
            ],
        ) {
            if o.ok {
                crate::launch::repo::write_if_changed(
                    &tmux_env_file(&plan.project),
                    o.stdout.as_bytes(),
                )?;
            }
        }
    }
    Ok(())
}

/// Kills one session; its pane processes' groups are added to `pgids`
/// (to be stopped after the SIGHUP). False: there was no such session.
fn kill_session(sock: &Path, session: &str, pgids: &mut Vec<i32>) -> bool {
    if session.is_empty() || !has_session(sock, session) {
        return false;
    }
    if let Ok(o) = tmux::call(
        sock,
        &[
            "list-panes",
            "-s",
            "-t",
            &format!("={session}"),
            "-F",
            "#{pane_pid}",
        ],
    ) {
        pgids.extend(
            o.stdout
                .lines()
                .filter_map(|l| l.trim().parse::<i32>().ok()),
        );
    }
    tmux_ok(sock, &["kill-session", "-t", &format!("={session}")])
}

/// Stops one role's session and its pane processes (`swarm role remove`).
pub(crate) fn stop_session(sock: &Path, session: &str) -> bool {
    let mut pgids = Vec::new();
    let killed = kill_session(sock, session, &mut pgids);
    stop_groups(&pgids, GRACE, &mut []);
    killed
}

/// Kills the project's tmux sessions and their pane processes, then the
/// server if nothing else runs on the socket. Returns the sessions killed.
pub fn stop_tmux(project: &Project) -> Result<Vec<String>> {
    let sock_file = project.tmux_socket();
    let mut killed = Vec::new();
    // A pointer that cannot be believed is removed (the repair) without a
    // tmux command sent, or a file removed, through the path it names.
    if let Pointer::Socket(sock) = tmux_socket::read(project) {
        let roles = Roles::load(&project.roles_tsv())?;
        let mut pgids: Vec<i32> = Vec::new();
        for r in &roles.roles {
            if kill_session(&sock, &r.session, &mut pgids) {
                killed.push(r.session.clone());
            }
        }
        // Pane shells got SIGHUP; anything that ignored it goes now.
        stop_groups(&pgids, GRACE, &mut []);
        let remaining = tmux::call(&sock, &["list-sessions", "-F", "#{session_name}"])
            .is_ok_and(|o| o.ok && !o.stdout.trim().is_empty());
        if !remaining {
            let _ = tmux::call(&sock, &["kill-server"]);
            let end = Instant::now() + GRACE;
            while tmux_ok(&sock, &["list-sessions"]) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
            if sock.exists() && !tmux_ok(&sock, &["list-sessions"]) {
                let _ = fsx::remove_file(&sock);
            }
        }
    }
    // Without a tmux-socket file the daemon's `auto` wake method stops using tmux.
    fsx::remove_file(&sock_file).at(&sock_file)?;
    fsx::remove_file(&tmux_env_file(project)).at(tmux_env_file(project))?;
    Ok(killed)
}
