//! `swarm audit [root]`: counts, stage latencies and failures; `--check`
//! verifies the trail (exit 2 on any violation).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::board;
use crate::bridge::{control_view, refusals};
use crate::cli;
use crate::daemon::{control, progress};
use crate::error::{exit, Error, Result};
use crate::person::holds;
use crate::protocol::layout::Project;
use crate::protocol::swarm::Swarm;
use crate::protocol::trail::{Scope, Trail};
use crate::protocol::{clock, dashboard, duration, rejected_tasks};
use crate::telemetry::spend;
use crate::text;
use crate::views::audit::bound::{self, Bound};
use crate::views::audit::check::{self, Findings};
use crate::views::audit::lag::Lag;
use crate::views::audit::{self, journaled};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Per role and overall: originals (sent, failed, still in the outbox), delivered \
copies (new, in_process, completed), latency of each stage measured on the copies \
(created -> enqueued, enqueued -> dequeued, dequeued -> completed: p50, p90, p99, \
max, nearest rank), the oldest item waiting in an inbox/new, and failures by reason.

--check verifies the trail instead and prints one `VIOLATION <kind> <subject>: \
<detail>` line per problem, then `CHECK OK` (exit 0) or `CHECK FAILED` (exit 2). \
A copy still on its way to another host's mirror is a `PENDING missing_copy` \
line, never a violation; --wait D waits up to D for them before judging \
(`CHECK PENDING`, exit 1, if some are still pending then). \
Kinds: malformed, unreadable_dir, rejected, missing_header, bad_time, time_order, \
state_mismatch, duplicate_original, orphan_copy, missing_copy, duplicate_copy, \
completed_twice, recipient_not_in_to, unknown_recipient, wrong_inbox, \
changed_since_journaled (a file whose content is not what handoffd journaled when \
it moved it), not_moved_by_handoffd (a file in sent/, failed/, pending_approval/ or \
an inbox that handoffd never moved). A file whose journal line a power cut may have \
taken is an `UNVERIFIED` line, not a violation; files older than the journal's \
digests are counted in a `NOTE` line.")]
pub struct Args {
    /// Project root or any folder inside it (default: the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// Verify the trail; exit 2 on any violation
    #[arg(long)]
    pub check: bool,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
    /// With --check: wait up to this long (e.g. 30s, 2m) for copies still
    /// on their way to another host's mirror before judging
    #[arg(long, value_name = "DURATION", requires = "check")]
    pub wait: Option<String>,
    /// Reference time for ages (RFC 3339; default: now)
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
}

pub fn run(args: Args) -> i32 {
    let now = match args.now.as_deref() {
        None => clock::now(),
        Some(s) => match clock::parse(s) {
            Some(t) => t,
            None => {
                let e = Error::bad_input(format!(
                    "invalid --now '{}': expected RFC 3339",
                    text::escape(s)
                ));
                return cli::report(&e, args.json);
            }
        },
    };
    if args.check {
        return run_check(&args);
    }
    let loaded = super::project(args.root.as_deref()).and_then(|p| {
        let swarm = Swarm::new(p);
        Ok((Trail::load_in(&swarm, &Scope::all())?, swarm))
    });
    let (t, swarm) = match loaded {
        Ok(x) => x,
        Err(e) => return cli::report(&e, args.json),
    };
    let r = audit::report(&t);
    let spend = spend::collect_in(&swarm);
    if args.json {
        let mut v = audit::json(&r, now);
        v["spend"] = serde_json::to_value(&spend).unwrap_or_default();
        cli::emit_json(v);
    } else {
        let mut s = audit::text(&r, now);
        s.push_str(&spend::text(&spend));
        cli::out(&s);
    }
    exit::OK
}

/// `--check [--wait D]`: judges once nothing is pending any more, or when
/// the wait is over. Pending copies are never violations; pending ones left
/// after `--wait` make the exit 1 (the mirrors did not catch up: an
/// environment problem, not a broken trail).
fn run_check(args: &Args) -> i32 {
    let wait = match args.wait.as_deref().map(duration::parse) {
        None => None,
        Some(Ok(d)) => Some(d),
        Some(Err(e)) => {
            let e = Error::bad_input(format!("--wait: {e}"));
            return cli::report(&e, args.json);
        }
    };
    let project = match super::project(args.root.as_deref()) {
        Ok(p) => p,
        Err(e) => return cli::report(&e, args.json),
    };
    let deadline = Instant::now() + wait.unwrap_or_default();
    let (swarm, t, f, bound) = loop {
        // Each look loads the swarm once (a changed lineup is seen by the next).
        let swarm = Swarm::new(project.clone());
        let (t, f, b) = match judge(&swarm) {
            Ok(x) => x,
            Err(e) => return cli::report(&e, args.json),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if f.pending.is_empty() || !f.violations.is_empty() || left.is_zero() {
            break (swarm, t, f, b);
        }
        // Polls the files; the mirrors are written by the bridge.
        std::thread::sleep(left.min(Duration::from_millis(250)));
    };
    let v = &f.violations;
    let stuck = wait.is_some() && v.is_empty() && !f.pending.is_empty();
    // A parked role is no broken rule, but its work does not move: shown.
    let spend = spend::collect_in(&swarm);
    let parked: Vec<_> = spend.parked().collect();
    if args.json {
        let list: Vec<_> = v.iter().map(check::Violation::json).collect();
        let pending: Vec<_> = f.pending.iter().map(check::Violation::json).collect();
        let obj = serde_json::json!({
            "ok": v.is_empty() && !stuck,
            "originals": t.originals.len(),
            "copies": t.copies.len(),
            "violations": list,
            "pending": pending,
            "unverified": bound.unverified.iter().map(check::Violation::json).collect::<Vec<_>>(),
            "predating_digests": bound.predating,
            "parked": parked.iter().map(|(role, why)| serde_json::json!({
                "role": role, "reason": why.words(), "budget": why,
            })).collect::<Vec<_>>(),
        });
        cli::emit_json(obj);
    } else {
        let mut s: String = v.iter().map(check::Violation::line).collect();
        s.push_str(&f.pending_lines());
        s.push_str(&bound.lines());
        for (role, why) in &parked {
            s.push_str(&format!("PARKED {role}: {}\n", why.words()));
        }
        if stuck {
            s.push_str(&format!(
                "CHECK PENDING: {} copies still on their way after --wait {}\n",
                f.pending.len(),
                args.wait.as_deref().unwrap_or("")
            ));
        } else {
            s.push_str(&check::summary(&t, v, f.pending.len()));
        }
        cli::out(&s);
    }
    if !v.is_empty() {
        exit::REFUSED
    } else if stuck {
        exit::ENV
    } else {
        exit::OK
    }
}

/// One look at the project: the trail as loaded now, everything every
/// check found in it, and which files the journal vouches for. Each look
/// asks the one loaded swarm it is given.
fn judge(swarm: &Swarm) -> Result<(Trail, Findings, Bound)> {
    let project = &swarm.project;
    let lag = Lag::before_load(project);
    // Read before the trail, as the lag: what it claims was journaled.
    let mark = progress::read_mark(project);
    let t = Trail::load_in(swarm, &Scope::all())?;
    let mut f = check::verify(&t, lag);
    let (bad, pending) = control_view::audit(swarm);
    f.violations.extend(bad);
    // What the bridge refused as not another host's word (a forged
    // trail record, a rewritten journal range): bridge::refusals.
    f.violations
        .extend(
            refusals::violations(project)
                .into_iter()
                .map(|(kind, subject, detail)| check::Violation {
                    kind,
                    subject,
                    detail,
                }),
        );
    // The board must say what the handoffs say (crates/swarm-records/src/board/).
    if let Some(b) = board::view_of_in(swarm, &t)? {
        f.violations
            .extend(b.disagreements.into_iter().map(|d| check::Violation {
                kind: "board",
                subject: board::tasks_file(project).display().to_string(),
                detail: d,
            }))
    }
    folders(swarm, &mut f);
    dashboard(project, &t, &mut f);
    // A delivery failing again and again needs a person.
    f.violations.extend(check::delivery_attention(project));
    // A role the audit guard keeps from new work (agent::guard).
    f.violations.extend(check::blocked_by_audit(swarm));
    f.pending.extend(pending);
    // The journal must say what the files say (daemon/progress.rs).
    f.violations.extend(journaled::check(project, &t, mark));
    // Every file is what handoffd moved (views/vouched.rs).
    let mut b = bound::check(&t);
    f.violations.append(&mut b.violations);
    Ok((t, f, b))
}

/// The approval folders hold only holds and their comments
/// (person::holds::problems; a held file that is no message is the trail's
/// `malformed` already), and SwarmForge's rejected-task folders only task
/// folders, each history of upstream's shape (protocol::rejected_tasks).
fn folders(swarm: &Swarm, f: &mut Findings) {
    let project = &swarm.project;
    f.violations.extend(
        holds::problems_in(swarm)
            .into_iter()
            .filter(|p| !p.unreadable_handoff)
            .map(|p| check::Violation {
                kind: "approval_folder",
                subject: p.path.display().to_string(),
                detail: p.why,
            }),
    );
    f.violations.extend(
        rejected_tasks::problems(project)
            .into_iter()
            .map(|p| check::Violation {
                kind: "rejected_tasks",
                subject: p.path.display().to_string(),
                detail: p.why,
            }),
    );
}

/// SwarmForge's request files must say what the messages say; what a
/// running handoffd rewrites after its next delivery is lag.
fn dashboard(project: &Project, t: &Trail, f: &mut Findings) {
    let running = control::running_pid(project).is_some();
    for d in dashboard::disagreements(t) {
        let v = check::Violation {
            kind: "dashboard",
            subject: project.dashboard_dir().display().to_string(),
            detail: d.line,
        };
        if d.rewritten && running {
            f.pending.push(v);
        } else {
            f.violations.push(v);
        }
    }
}
