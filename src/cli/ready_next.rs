//! `ready-next` (SwarmForge's `ready_for_next.sh` and its `_task`/`_batch` forms).

use clap::Parser;

use crate::config::Config;
use crate::discover;
use crate::error::{exit, Error, Result};
use crate::layout::Worktree;
use crate::printout;
use crate::queue::Inbox;
use crate::roles::{ReceiveMode, Roles};

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
}

/// The inbox and receive mode for this call: a forced mode needs only the
/// worktree; otherwise the role's row in roles.tsv decides (§7.1).
pub fn resolve(task: bool, batch: bool) -> Result<(Worktree, ReceiveMode, Config)> {
    let cwd = discover::current_dir()?;
    let forced = match (task, batch) {
        (true, _) => Some(ReceiveMode::Task),
        (_, true) => Some(ReceiveMode::Batch),
        _ => None,
    };
    if let Some(mode) = forced {
        let wt = discover::locate_worktree(&cwd)?;
        let config = match discover::project_of(&wt) {
            Some(p) => Config::load(&p.config_file())?,
            None => Config::default(),
        };
        return Ok((wt, mode, config));
    }
    let role = discover::acting_role()?;
    let at = discover::locate(&cwd)?;
    let roles = Roles::load(&at.project.roles_tsv())?;
    let row = roles
        .find(&role)
        .ok_or_else(|| Error::env(format!("Unknown role: {role}")))?;
    let mode = row.receive_mode().map_err(|m| {
        Error::refused(
            "INVALID_RECEIVE_MODE",
            format!("{} for role {role}", crate::header::escape(m)),
            vec![],
        )
    })?;
    crate::send::check_role_worktree(row, &at)?;
    let config = Config::load(&at.project.config_file())?;
    Ok((at.worktree, mode, config))
}

pub fn run() -> i32 {
    let args: Args = match super::parse_args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let result = resolve(args.task, args.batch).and_then(|(wt, mode, config)| {
        crate::fsx::set_fsync(config.daemon.fsync);
        Inbox {
            wt: &wt,
            max_bytes: config.limits.max_file_bytes,
        }
        .ready(mode)
    });
    let me = viewer_role();
    let viewer = printout::Viewer {
        role: me.as_deref(),
    };
    match result {
        Ok(r) => {
            if args.json {
                super::out(&format!("{}\n", printout::ready_json(&r, viewer)));
            } else {
                super::out(&printout::ready_text(&r, viewer));
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
