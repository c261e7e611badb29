//! `ready-next` (SwarmForge's `ready_for_next.sh` and its `_task`/`_batch` forms).

use clap::Parser;

use crate::agent::printout::{self, Resume};
use crate::error::exit;
use crate::forum::session;

pub use crate::agent::place::{forum_view, items, resolve, resolve_as, Resolved};

#[derive(Parser, Debug)]
#[command(
    name = "ready-next",
    version,
    about = "Accept the next handoff (or resume the one in process)"
)]
pub struct Args {
    /// Force task mode (SwarmForge's ready_for_next_task.sh)
    #[arg(long, conflicts_with = "batch")]
    pub task: bool,
    /// Force batch mode (SwarmForge's ready_for_next_batch.sh)
    #[arg(long)]
    pub batch: bool,
    /// Print one JSON object instead of the text tokens
    #[arg(long)]
    pub json: bool,
    /// After the ready output, print the last N transcript lines that involve
    /// this role (RESUME_CONTEXT:) and the current session's latest digest
    /// (what the watchdog gives a restarted agent)
    #[arg(long, value_name = "N")]
    pub resume_context: Option<usize>,
    /// When nothing is waiting, wait up to SECS for an item to be delivered
    /// (on file events), then print NO_TASK
    #[arg(long, value_name = "SECS", value_parser = crate::agent::wait::parse_wait)]
    pub wait: Option<std::time::Duration>,
}
pub fn run() -> i32 {
    let args: Args = match super::parse_args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let mut place = None;
    let result = resolve(args.task, args.batch).and_then(|r| {
        crate::fsx::set_fsync(r.config().daemon.fsync);
        if let Some(role) = crate::agent::guard::acting_role(&r, viewer_role()) {
            crate::agent::guard::before_ready(&r, &role)?;
        }
        let inbox = r.inbox();
        let ready = crate::agent::wait::ready_wait(&inbox, r.mode, args.wait.unwrap_or_default());
        place = Some(r);
        ready
    });
    let me = viewer_role();
    match result {
        Ok((r, reactions)) => {
            let view = place
                .as_ref()
                .map(|p| forum_view(p, &r, me.as_deref()))
                .unwrap_or_default();
            let routes = place.as_ref().and_then(|p| p.routes());
            let viewer = printout::Viewer {
                role: me.as_deref(),
                forum: Some(&view),
                preamble: place.as_ref().is_none_or(|p| p.keeps_preamble()),
                cards: routes,
            };
            let resume = args
                .resume_context
                .map(|n| resume(place.as_ref(), me.as_deref(), n));
            if args.json {
                let mut v = printout::ready_json(&r, viewer);
                if !reactions.is_empty() {
                    v["reactions"] = printout::reactions_json(&reactions);
                }
                if let Some(res) = &resume {
                    v["resume_context"] = printout::resume_json(res);
                }
                super::emit_json(v);
            } else {
                let mut text = printout::reactions_text(&reactions);
                text.push_str(&printout::ready_text(&r, viewer));
                if let Some(res) = &resume {
                    text.push_str(&printout::resume_text(res));
                }
                super::out(&text);
            }
            exit::OK
        }
        Err(e) => super::report(&e, args.json),
    }
}

/// The reader for `MENTIONED:` / `CC:`: `SWARMFORGE_ROLE` when set (the
/// copy's `recipient` counts too).
pub fn viewer_role() -> Option<String> {
    std::env::var("SWARMFORGE_ROLE")
        .ok()
        .filter(|r| !r.is_empty())
}

/// `--resume-context N`: the role's last N transcript lines and the current
/// session's latest digest. Never fails: the item is already handed out, so
/// a problem only shortens what is shown (and is said on stderr).
fn resume(place: Option<&Resolved>, me: Option<&str>, n: usize) -> Resume {
    let Some(project) = place.and_then(Resolved::project) else {
        return Resume::default();
    };
    let lines = match crate::views::transcript::recent_lines(project, me, n) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ready-next: no resume context: {e}");
            Vec::new()
        }
    };
    let latest_digest = session::current(project)
        .ok()
        .flatten()
        .and_then(|s| session::latest_digest(project, &s.id));
    Resume {
        lines,
        latest_digest,
    }
}
