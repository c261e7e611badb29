//! `handoffd [--once] [--poll] <project-root>`.

use std::path::PathBuf;

use crate::daemon::feature::Features;
use crate::daemon::{self, Options};
use crate::error::exit;

pub const USAGE: &str = "Usage: handoffd [--once] [--poll] <project-root>";

/// The command line: `run` parses with it; completions and man pages are
/// rendered from it. A bad command line answers with [`USAGE`], as
/// SwarmForge's `handoffd.bb` answers with its own.
pub fn command() -> clap::Command {
    use clap::{Arg, ArgAction, Command};
    Command::new("handoffd")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Route every role's outbox into its recipients' inboxes")
        .after_help(
            "Logs to .swarmforge/daemon/handoffd.log and events.jsonl (rotated by size, \
             see `logs:` in swarm.yaml). `swarm stop` stops it.",
        )
        .args_override_self(true)
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

/// `--help`: the usage line and the two flags.
fn help() -> String {
    format!(
        "{USAGE}\n\nRoutes every role's outbox into its recipients' inboxes.\n  \
         --once  one delivery pass, then exit\n  --poll  poll instead of file events\n"
    )
}

/// What handoffd plugs into the delivery core (`daemon::feature`), in the
/// order they are called.
pub fn features() -> Features {
    Features::default()
        .with(crate::forum::Forum::default())
        .with(crate::lineup::seat::SeatRequests)
        .with(crate::launch::agents::turn_end::TurnEnds)
        .with(crate::search::indexer::Indexing::default())
}

pub fn run() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(e) = super::non_utf8_argument(&args) {
        eprintln!("handoffd: {e}");
        return e.exit_code();
    }
    let usage = || {
        eprintln!("{USAGE}");
        exit::ENV
    };
    let matches = match super::parse_own(command(), &args, help, usage) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let opts = Options {
        once: matches.get_flag("once"),
        poll: matches.get_flag("poll"),
    };
    let Some(root) = matches.get_one::<String>("root").map(PathBuf::from) else {
        return exit::ENV; // clap requires it
    };
    match daemon::run(&root, opts, features()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("handoffd: {e}");
            e.exit_code()
        }
    }
}
