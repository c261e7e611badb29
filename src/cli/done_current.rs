//! `done-current` (SwarmForge's `done_with_current.sh` and its `_task`/`_batch` forms).

use clap::Parser;

use crate::agent::printout;
use crate::error::exit;

#[derive(Parser, Debug)]
#[command(
    name = "done-current",
    version,
    about = "Complete the handoff in process, then accept the next one"
)]
pub struct Args {
    /// Force task mode (SwarmForge's done_with_current_task.sh)
    #[arg(long, conflicts_with = "batch")]
    pub task: bool,
    /// Force batch mode (SwarmForge's done_with_current_batch.sh)
    #[arg(long)]
    pub batch: bool,
    /// Print one JSON object instead of the text tokens
    #[arg(long)]
    pub json: bool,
    /// Complete it as failed: stamps `failed: <reason>` (one line, at most
    /// 200 characters) with `completed_at` and prints `FAILED: <reason>`
    #[arg(long, value_name = "REASON")]
    pub failed: Option<String>,
    /// When nothing is waiting after the completion, wait up to SECS for an
    /// item to be delivered (on file events), then print NO_TASK
    #[arg(long, value_name = "SECS", value_parser = crate::agent::wait::parse_wait)]
    pub wait: Option<std::time::Duration>,
    /// Take nothing after the completion: print MAIL_WAITING when work
    /// waits, else NO_TASK (today's SwarmForge `done_with_current.sh`)
    #[arg(long, conflicts_with = "wait")]
    pub mail_waiting: bool,
    /// Finish even though cards of the current work have no outgoing
    /// git_handoff (they stay in this lane) or the audit gate holds this
    /// role's git handoff back (it is dropped); prints DROPPED: for each
    #[arg(long)]
    pub drop: bool,
}

pub fn run() -> i32 {
    let args: Args = match super::parse_args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let mut place = None;
    let mut dropped = Vec::new();
    let result = super::ready_next::resolve(args.task, args.batch).and_then(|r| {
        crate::fsx::set_fsync(r.config().daemon.fsync);
        if let Some(role) = super::ready_next::viewer_role() {
            dropped = crate::agent::guard::before_done(&r, &role, args.drop, args.mail_waiting)?;
        }
        let inbox = r.inbox();
        let done = if args.mail_waiting {
            inbox.done_announcing(r.mode, args.failed.as_deref())
        } else {
            crate::agent::wait::done_then_wait(
                &inbox,
                r.mode,
                args.failed.as_deref(),
                args.wait.unwrap_or_default(),
            )
        };
        place = Some(r);
        done
    });
    let me = super::ready_next::viewer_role();
    // Like upstream's `--drop`: what is left behind is said first.
    for d in &dropped {
        if !args.json {
            super::out(&format!("DROPPED: {}\n", crate::text::escape(d)));
        }
    }
    match result {
        Ok(d) => {
            let view = match (&place, &d.next) {
                (Some(p), Ok(next)) => super::ready_next::forum_view(p, next, me.as_deref()),
                _ => printout::ForumView::default(),
            };
            let routes = place.as_ref().and_then(|p| p.routes());
            let viewer = printout::Viewer {
                role: me.as_deref(),
                forum: Some(&view),
                preamble: place.as_ref().is_none_or(|p| p.keeps_preamble()),
                cards: routes,
            };
            if args.json {
                let mut v = printout::done_json(&d, viewer);
                if !dropped.is_empty() {
                    v["dropped"] = serde_json::json!(dropped);
                }
                super::emit_json(v);
            } else {
                super::out(&printout::done_text(&d, viewer));
            }
            // Like SwarmForge's exec of the ready helper: COMPLETED lines first,
            // then the ready step's refusal and exit code.
            match &d.next {
                Ok(_) => exit::OK,
                Err(e) => super::report(e, false),
            }
        }
        Err(e) => super::report(&e, args.json),
    }
}
