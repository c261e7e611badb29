//! `swarm session start [--title T] | close [--reason R] [--id S] | list [--json]`.

use clap::Subcommand;

use crate::error::exit;
use crate::forum::{requests, session};

pub type Args = super::Actions<Action>;

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Open a session; its id is stamped on every message sent while it is open
    Start {
        #[arg(long)]
        title: Option<String>,
    },
    /// Close the open session (or --id S) with a recorded reason
    Close {
        #[arg(long)]
        reason: String,
        #[arg(long)]
        id: Option<String>,
    },
    /// Every session, oldest first
    List,
}

/// Who runs the command: the acting role, or a person.
pub fn actor() -> String {
    std::env::var("SWARMFORGE_ROLE")
        .ok()
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "human".to_string())
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(None) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    let result = match &args.action {
        Action::Start { title } => requests::session_start(&project, title.as_deref(), &actor())
            .map(|s| {
                if args.json {
                    crate::cli::stamped(serde_json::to_value(&s).unwrap_or_default()).to_string()
                        + "\n"
                } else {
                    format!("SESSION_STARTED: {}\n", s.id)
                }
            }),
        Action::Close { reason, id } => requests::session_close(&project, id.as_deref(), reason)
            .map(|s| {
                if args.json {
                    crate::cli::stamped(serde_json::to_value(&s).unwrap_or_default()).to_string()
                        + "\n"
                } else {
                    format!("SESSION_CLOSED: {} {}\n", s.id, reason)
                }
            }),
        Action::List => session::list(&project).map(|all| {
            if args.json {
                crate::cli::stamped(serde_json::json!({ "sessions": all })).to_string() + "\n"
            } else {
                all.iter()
                    .map(|s| {
                        format!(
                            "{}\t{}\t{}\t{}\t{}\n",
                            s.id,
                            if s.is_open() { "open" } else { "closed" },
                            s.started_at,
                            s.close_reason.as_deref().unwrap_or("-"),
                            crate::text::escape(s.title.as_deref().unwrap_or("-"))
                        )
                    })
                    .collect()
            }
        }),
    };
    match result {
        Ok(text) => {
            crate::cli::out(&text);
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
