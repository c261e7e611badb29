//! `swarm audit [root]`: counts, stage latencies and failures; `--check`
//! verifies the trail (exit 2 on any violation).

use std::path::PathBuf;

use crate::error::{exit, Error};
use crate::protocol::clock;
use crate::protocol::trail::{Scope, Trail};
use crate::views::audit::{self, check};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Per role and overall: originals (sent, failed, still in the outbox), delivered \
copies (new, in_process, completed), latency of each stage measured on the copies \
(created -> enqueued, enqueued -> dequeued, dequeued -> completed: p50, p90, p99, \
max, nearest rank), the oldest item waiting in an inbox/new, and failures by reason.

--check verifies the trail instead and prints one `VIOLATION <kind> <subject>: \
<detail>` line per problem, then `CHECK OK` (exit 0) or `CHECK FAILED` (exit 2). \
Kinds: malformed, unreadable_dir, rejected, missing_header, bad_time, time_order, \
state_mismatch, duplicate_original, orphan_copy, missing_copy, duplicate_copy, \
completed_twice, recipient_not_in_to, unknown_recipient, wrong_inbox.")]
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
                let e = Error::env(format!(
                    "invalid --now '{}': expected RFC 3339",
                    crate::text::escape(s)
                ));
                return crate::cli::report(&e, args.json);
            }
        },
    };
    let loaded = super::project(args.root.as_deref()).and_then(|p| Trail::load(&p, &Scope::all()));
    let t = match loaded {
        Ok(t) => t,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    if args.check {
        let v = check::check(&t);
        if args.json {
            let list: Vec<_> = v.iter().map(check::Violation::json).collect();
            let obj = serde_json::json!({
                "ok": v.is_empty(),
                "originals": t.originals.len(),
                "copies": t.copies.len(),
                "violations": list,
            });
            crate::cli::emit_json(obj);
        } else {
            let mut s: String = v.iter().map(check::Violation::line).collect();
            s.push_str(&check::summary(&t, &v));
            crate::cli::out(&s);
        }
        return if v.is_empty() {
            exit::OK
        } else {
            exit::REFUSED
        };
    }
    let r = audit::report(&t);
    if args.json {
        crate::cli::emit_json(audit::json(&r, now));
    } else {
        crate::cli::out(&audit::text(&r, now));
    }
    exit::OK
}
