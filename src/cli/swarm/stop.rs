//! `swarm stop [root]`: stop file + TERM, wait up to 5 s, then KILL; only the
//! process that holds the daemon lock is ever signalled.

use crate::daemon::control;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub root: super::RootArg,
    /// One JSON object instead of the text line
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    super::answer(
        args.root.path(),
        args.json,
        |p| control::stop(p, control::GRACE),
        |r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            // `daemon_pid` as in status and down; `pid` stays.
            v["daemon_pid"] = serde_json::json!(r.pid);
            v
        },
        |r| match (r.pid, r.killed) {
            (None, _) => "handoffd was not running\n".to_string(),
            (Some(p), false) => format!("handoffd stopped (pid {p})\n"),
            (Some(p), true) => format!("handoffd killed after 5 s (pid {p})\n"),
        },
    )
}
