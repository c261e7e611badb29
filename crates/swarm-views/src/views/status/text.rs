//! `swarm status` as text: the daemon line, the queue table, then one line
//! per thing a person may need to look at.
//!
//! Why a module: collecting the status (mod.rs) and drawing it are apart, so
//! `--json` and the cockpit read the same [`Status`] the text is drawn from.
//! Invariant: anything an agent or the disk wrote (names, reasons, errors)
//! is escaped before it reaches the terminal; the sections keep their order.

use crate::board;
use crate::bridge::control_view;
use crate::daemon::pane;
use crate::telemetry::spend;
use crate::text::escape;
use crate::views::attention;
use crate::views::liveness::State;

use super::{RoleStatus, Status};

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
    queue_table(&mut out, &s.roles);
    agent_lines(&mut out, &s.roles);
    for r in s.roles.iter() {
        if let Some(p) = &r.problem {
            out.push_str(&format!("{}: {}\n", r.role, escape(p)));
        }
    }
    across_hosts(&mut out, s);
    gates(&mut out, s);
    if let Some(b) = &s.board {
        out.push_str(&board::text(b));
    }
    daemon_backlog(&mut out, s);
    approvals(&mut out, s);
    rejected_and_dashboard(&mut out, s);
    for r in &s.reservations {
        out.push_str(&format!("reserved: {}\n", r.describe()));
    }
    out.push_str(&spend::text(&s.spend));
    out.push_str(&attention::text(&s.attention));
    for p in &s.problems {
        out.push_str(&format!("roles.tsv: {p}\n"));
    }
    if let Some(p) = &s.tmux_socket_problem {
        out.push_str(&format!("{p}\n"));
    }
    out
}

/// The table: one row per role with its queue's counts.
fn queue_table(out: &mut String, roles: &[RoleStatus]) {
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
    for r in roles {
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
}

/// Each role's activity and agent state, and why its work does not move.
fn agent_lines(out: &mut String, roles: &[RoleStatus]) {
    for r in roles {
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
                // An ACP client's own words: no pane to attach to.
                (Some(p), true) if st == State::Waiting => out.push_str(&format!(": {p}")),
                (Some(p), true) => out.push_str(&format!(": {p} (swarm attach {})", r.role)),
                // Each option by the number that chooses it.
                (Some(p), false) => out.push_str(&format!(
                    ": {p}; options: {} (swarm attach {} --choose N)",
                    pane::numbered_options(&r.agent_options),
                    r.role
                )),
                (None, _) => {}
            }
            if let Some(w) = r.not_moving.as_ref().filter(|_| r.agent_prompt.is_none()) {
                out.push_str(&format!("; not moving: {}", escape(w)));
            }
            out.push('\n');
        } else if let Some(w) = &r.not_moving {
            out.push_str(&format!("{}: not moving: {}\n", r.role, escape(w)));
        }
    }
}

/// The bridge's held items, copies from other hosts, pause and controls.
fn across_hosts(out: &mut String, s: &Status) {
    for w in &s.bridge_waiting {
        out.push_str(&format!(
            "waiting on the bridge: {} for {}: {}\n",
            escape(&w.name),
            w.role,
            escape(&w.reason)
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
        out.push_str(&control_view::text(c));
    }
}

/// Roles held back by the audit gate or by a held git handoff.
fn gates(out: &mut String, s: &Status) {
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
                escape(&f.display().to_string())
            ));
        }
    }
}

/// What handoffd has still to do: agents' requests and wake-up retries.
fn daemon_backlog(out: &mut String, s: &Status) {
    for w in &s.agent_requests {
        out.push_str(&format!(
            "requests: {} has {} forum/board request(s) handoffd has not taken and {} taken but not answered (is handoffd running?)\n",
            w.role, w.asked, w.taken
        ));
    }
    for w in &s.wake_retries {
        out.push_str(&format!(
            "wake retry: {} failed {} time(s), last: {}; handoffd tries again at {}\n",
            escape(&w.role),
            w.attempt,
            escape(&w.last_error),
            w.next_at.as_deref().unwrap_or("-")
        ));
    }
}

/// Handoffs held for `swarm approve` / `swarm deny`, and what is wrong in
/// the approval folders.
fn approvals(out: &mut String, s: &Status) {
    for h in &s.held {
        out.push_str(&format!(
            "held {} {} -> {} ({}), {}: swarm approve {} | swarm deny {} --reason R\n",
            escape(&h.kind),
            escape(&h.from),
            escape(&h.to),
            escape(h.title.as_deref().unwrap_or("-")),
            secs(h.age_s),
            h.id,
            h.id
        ));
    }
    for p in &s.approval_problems {
        out.push_str(&format!("approvals: NOT OK: {}\n", escape(p)));
    }
}

/// SwarmForge's rejected-task folders and its dashboard files.
fn rejected_and_dashboard(out: &mut String, s: &Status) {
    for k in &s.rejected_tasks {
        let comments: usize = k.history.values().map(Vec::len).sum();
        let mut line = format!(
            "rejected: {}: {comments} review comment(s) on {} document(s)",
            escape(&k.task_id),
            k.history.len()
        );
        if !k.archived.is_empty() {
            line.push_str(&format!(", {} file(s) kept by Delete", k.archived.len()));
        }
        out.push_str(&format!("{line} ({})\n", k.dir.display()));
    }
    for p in &s.rejected_problems {
        out.push_str(&format!("rejected-tasks: NOT OK: {}\n", escape(p)));
    }
    for d in &s.dashboard {
        out.push_str(&format!("dashboard: NOT IN STEP: {}\n", escape(d)));
    }
}
