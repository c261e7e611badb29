//! `swarm discussion open <id> --order a,b,c [--max-turns N] | close <id> --reason R
//! | status <id> [--json] | list`.

use clap::Subcommand;

use crate::error::exit;
use crate::forum::discussion;
use crate::protocol::roles::Roles;

pub type Args = super::Actions<Action>;

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Open a discussion with a fixed speaking order (the first speaks first)
    Open {
        id: String,
        #[arg(long, value_delimiter = ',', required = true)]
        order: Vec<String>,
        #[arg(long)]
        max_turns: Option<u32>,
    },
    /// Close it with a recorded reason (e.g. explicit_close, human_closed)
    Close {
        id: String,
        #[arg(long)]
        reason: String,
    },
    /// Order, turn count, expected speaker, open or closed with reason
    Status { id: String },
    /// Every discussion
    List,
}

fn status_text(s: &discussion::Status) -> String {
    format!(
        "DISCUSSION: {}\nORDER: {}\nTURNS: {}{}\nSKIPS: {}\nSTATE: {}\nEXPECTED: {}\n",
        s.id,
        s.order.join(","),
        s.turns,
        s.max_turns.map(|m| format!("/{m}")).unwrap_or_default(),
        s.skips,
        if s.open {
            "open".to_string()
        } else {
            format!("closed {}", s.close_reason.as_deref().unwrap_or("-"))
        },
        s.expected.as_deref().unwrap_or("-"),
    )
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(None) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    let status = |id: &str| {
        let d = discussion::load(&project, id)?;
        Ok::<_, crate::Error>(d.status(&discussion::log(&project, id)?))
    };
    let render = |s: discussion::Status| {
        if args.json {
            crate::cli::stamped(serde_json::to_value(&s).unwrap_or_default()).to_string() + "\n"
        } else {
            status_text(&s)
        }
    };
    let result = match &args.action {
        Action::Open {
            id,
            order,
            max_turns,
        } => Roles::load(&project.roles_tsv()).and_then(|roles| {
            crate::forum::requests::discussion_open(
                &project,
                &roles,
                id,
                order,
                *max_turns,
                &super::session::actor(),
            )?;
            status(id).map(render)
        }),
        Action::Close { id, reason } => {
            crate::forum::requests::discussion_close(&project, id, reason)
                .and_then(|_| status(id).map(render))
        }
        Action::Status { id } => status(id).map(render),
        Action::List => discussion::list(&project).and_then(|all| {
            let mut v = Vec::new();
            for d in all {
                v.push(d.status(&discussion::log(&project, &d.id)?));
            }
            Ok(if args.json {
                crate::cli::stamped(serde_json::json!({ "discussions": v })).to_string() + "\n"
            } else {
                v.iter()
                    .map(|s| {
                        format!(
                            "{}\t{}\t{} turns\t{}\n",
                            s.id,
                            if s.open { "open" } else { "closed" },
                            s.turns,
                            s.expected.as_deref().unwrap_or("-")
                        )
                    })
                    .collect()
            })
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
