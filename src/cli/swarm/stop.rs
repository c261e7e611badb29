//! `swarm stop [root]`: stop file + TERM, wait up to 5 s, then KILL; only the
//! process that holds the daemon lock is ever signalled.

use std::path::PathBuf;

use crate::daemon::control;
use crate::error::exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Project root (default: found from the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// One JSON object instead of the text line
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(args.root.as_deref()) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    match control::stop(&project, control::GRACE) {
        Ok(r) => {
            if args.json {
                let mut v = serde_json::to_value(&r).unwrap_or_default();
                // `daemon_pid` as in status and down; `pid` stays.
                v["daemon_pid"] = serde_json::json!(r.pid);
                crate::cli::emit_json(v);
            } else {
                let text = match (r.pid, r.killed) {
                    (None, _) => "handoffd was not running\n".to_string(),
                    (Some(p), false) => format!("handoffd stopped (pid {p})\n"),
                    (Some(p), true) => format!("handoffd killed after 5 s (pid {p})\n"),
                };
                crate::cli::out(&text);
            }
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
