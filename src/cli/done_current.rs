//! `done-current` (SwarmForge's `done_with_current.sh` and its `_task`/`_batch` forms).

use clap::Parser;

use crate::error::exit;
use crate::printout;
use crate::queue::Inbox;

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
}

pub fn run() -> i32 {
    let args: Args = match super::parse_args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let result =
        super::ready_next::resolve(args.task, args.batch).and_then(|(wt, mode, config)| {
            crate::fsx::set_fsync(config.daemon.fsync);
            Inbox {
                wt: &wt,
                max_bytes: config.limits.max_file_bytes,
            }
            .done(mode)
        });
    let me = super::ready_next::viewer_role();
    let viewer = printout::Viewer {
        role: me.as_deref(),
    };
    match result {
        Ok(d) => {
            if args.json {
                super::out(&format!("{}\n", printout::done_json(&d, viewer)));
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
