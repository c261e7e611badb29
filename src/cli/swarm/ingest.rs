//! `swarm ingest --role R --file F --match REGEX [--to all]`: follow a log
//! file and post each matching line's capture as a `post` from R, at most
//! once per line across restarts (crates/swarm-actors/src/agent/ingest.rs).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::agent::ingest::{Event, Ingest, Options};
use crate::error::Error;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The role the posts come from
    #[arg(long)]
    pub role: String,
    /// The log file to follow (it may not exist yet)
    #[arg(long)]
    pub file: PathBuf,
    /// A regular expression; a matching line's group `text` (else group 1,
    /// else the whole match) is posted
    #[arg(long = "match", value_name = "REGEX")]
    pub pattern: String,
    /// Recipients of the posts
    #[arg(long, default_value = "all")]
    pub to: String,
    /// Priority of the posts
    #[arg(long, default_value = "50")]
    pub priority: String,
    /// A replaced or truncated log opens a new forum session (the open one
    /// is closed with reason new_log)
    #[arg(long)]
    pub sessions: bool,
    /// Read what is there now and exit instead of following
    #[arg(long)]
    pub once: bool,
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(None) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, false),
    };
    let pattern = match regex::RegexBuilder::new(&args.pattern)
        .size_limit(1 << 20)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let e = Error::bad_input(format!(
                "--match '{}' is not a valid regular expression: {}",
                crate::text::escape(&args.pattern),
                crate::text::escape(&e.to_string().replace('\n', " "))
            ));
            return crate::cli::report(&e, false);
        }
    };
    // Both go into the draft's header lines: one line each, so no value can
    // add a header; the draft validation then checks them as any draft's.
    for (flag, v) in [("--to", &args.to), ("--priority", &args.priority)] {
        if v.is_empty() || v.chars().any(char::is_control) {
            let e = Error::bad_input(format!(
                "{flag} '{}' must be one non-empty line",
                crate::text::escape(v)
            ));
            return crate::cli::report(&e, false);
        }
    }
    let opts = Options {
        role: args.role,
        file: args.file,
        pattern,
        to: args.to,
        priority: args.priority,
        sessions: args.sessions,
        once: args.once,
    };
    let ingest = match Ingest::new(&project, opts) {
        Ok(i) => i,
        Err(e) => return crate::cli::report(&e, false),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    let mut say = |e: Event| {
        let line = match e {
            Event::Posted { offset, path } => {
                format!("POSTED: {} (line at byte {offset})", path.display())
            }
            Event::Recovered { offset } => format!("ALREADY_POSTED: line at byte {offset}"),
            Event::Skipped { offset, why } => format!("SKIPPED: line at byte {offset}: {why}"),
            Event::NewLog {
                why,
                session: Some(s),
            } => format!("NEW_LOG: {why}; session {s}"),
            Event::NewLog { why, session: None } => format!("NEW_LOG: {why}; reading from byte 0"),
        };
        println!("{}", crate::text::escape(&line));
    };
    match ingest.run(&|| stop.load(Ordering::Relaxed), &mut say) {
        Ok(()) => 0,
        Err(e) => crate::cli::report(&e, false),
    }
}
