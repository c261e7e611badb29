//! `handoffd [--once] [--poll] <project-root>`.

use std::path::PathBuf;

use crate::daemon::{self, Options};
use crate::error::exit;

pub const USAGE: &str = "Usage: handoffd [--once] [--poll] <project-root>";

/// The clap definition of handoffd, for completions and man pages only: the
/// arguments are parsed by hand to keep SwarmForge's usage line.
pub fn command() -> clap::Command {
    use clap::{Arg, ArgAction, Command};
    Command::new("handoffd")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Route every role's outbox into its recipients' inboxes")
        .after_help(
            "Logs to .swarmforge/daemon/handoffd.log and events.jsonl (rotated by size, \
             see `logs:` in swarm.yaml). `swarm stop` stops it.",
        )
        .arg(
            Arg::new("once")
                .long("once")
                .action(ArgAction::SetTrue)
                .help("One delivery pass, then exit"),
        )
        .arg(
            Arg::new("poll")
                .long("poll")
                .action(ArgAction::SetTrue)
                .help("Poll instead of file events"),
        )
        .arg(
            Arg::new("root")
                .value_name("PROJECT_ROOT")
                .required(true)
                .value_hint(clap::ValueHint::DirPath)
                .help("The project root"),
        )
}

pub fn run() -> i32 {
    let mut opts = Options::default();
    let mut root: Option<PathBuf> = None;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--once" => opts.once = true,
            "--poll" => opts.poll = true,
            "-h" | "--help" => {
                println!("{USAGE}\n\nRoutes every role's outbox into its recipients' inboxes.\n  --once  one delivery pass, then exit\n  --poll  poll instead of file events");
                return exit::OK;
            }
            "-V" | "--version" => {
                println!("handoffd {}", env!("CARGO_PKG_VERSION"));
                return exit::OK;
            }
            s if s.starts_with('-') || root.is_some() => {
                eprintln!("{USAGE}");
                return exit::ENV;
            }
            s => root = Some(PathBuf::from(s)),
        }
    }
    let Some(root) = root else {
        eprintln!("{USAGE}");
        return exit::ENV;
    };
    match daemon::run(&root, opts, Box::<crate::forum::Forum>::default()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("handoffd: {e}");
            e.exit_code()
        }
    }
}
