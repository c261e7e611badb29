//! `swarm answer <clarify-id> [root] --choice N [--choice M] [--text T]`.

use std::path::PathBuf;

use crate::error::{exit, Error, Token};
use crate::person::answer;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Answers an open clarify as the role that received it (usually a human role): \
the answer goes to the asker through the same checks as swarm-handoff, with \
in_reply_to set to the clarify, and the clarify's copy is completed so it \
leaves the attention list of `swarm status`. Options are numbered from 1 as \
ready-next prints them. More than one --choice needs allow_multiple: yes; \
--text needs allow_custom: yes.
Exit 0 answered; 1 usage, no such clarify in any inbox, or an environment \
error; 2 refused (ANSWER INVALID with the reasons, NOT_A_CLARIFY, CLARIFY_CLOSED, \
PERSON_ONLY: an agent answering as a person, NOT_YOUR_CLARIFY: an agent answering \
as another role; an agent is a process with SWARMFORGE_ROLE in its own or a parent's environment, see \
docs/security.md). In a swarm across hosts, a clarify whose copy is on another \
host is answered there: the answer travels over the bridge (docs/bridge.md, \
\"One control\") and exits 0 once sent.")]
pub struct Args {
    /// The clarify's message id (`<IDTS>_<SEQ>_from_<asker>`), or a unique prefix of it
    pub id: String,
    /// Project root or any folder inside it (default: the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// A chosen option, numbered from 1 (repeat for several)
    #[arg(long = "choice", value_name = "N")]
    pub choices: Vec<usize>,
    /// A custom answer text
    #[arg(long, value_name = "TEXT")]
    pub text: Option<String>,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    if args.choices.is_empty() && args.text.is_none() {
        eprintln!("swarm answer: give --choice N (repeatable) and/or --text TEXT");
        return exit::ENV;
    }
    // The clarify's id, or a unique prefix of one.
    let (project, id) = match super::project(args.root.as_deref()).and_then(|p| {
        let id = crate::protocol::idprefix::expand(&p, &args.id)?;
        Ok((p, id))
    }) {
        Ok(x) => x,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    let args = Args { id, ..args };
    // Loaded once: the bridge's settings and the answer share it.
    let swarm = crate::protocol::swarm::Swarm::new(project.clone());
    if crate::bridge::control::bridged_in(&swarm).is_some()
        && !crate::bridge::control::clarify_here(&project, &args.id)
    {
        return answer_elsewhere(&project, &args);
    }
    let caller = crate::agent::caller::Caller::detect();
    match answer::answer_in(
        swarm,
        &args.id,
        &args.choices,
        args.text.as_deref(),
        &caller,
    ) {
        Ok(a) => {
            if args.json {
                let mut v = serde_json::to_value(&a).unwrap_or_default();
                v["status"] = serde_json::json!("answered");
                crate::cli::emit_json(v);
            } else {
                let mut s = format!("HANDOFF QUEUED: {}\n", a.queued.path.display());
                if let Some(c) = &a.completed {
                    s.push_str(&format!("COMPLETED: {}\n", c.display()));
                }
                crate::cli::out(&s);
            }
            exit::OK
        }
        Err(Error::Invalid { errors, .. }) => {
            // The draft's errors, reported against the clarify answered.
            let id = crate::text::escape(&args.id);
            eprintln!(
                "{}",
                Error::invalid(Token::AnswerInvalid, id, errors.clone())
            );
            if args.json {
                let v = serde_json::json!({
                    "status": "invalid",
                    "token": Token::AnswerInvalid.name(),
                    "message": format!("{}: {}", Token::AnswerInvalid.name(), errors.join("; ")),
                    "paths": [],
                    "clarify": args.id,
                    "errors": errors,
                    "exit_code": exit::REFUSED,
                });
                crate::cli::emit_json(v);
            }
            exit::REFUSED
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}

/// A clarify whose copy is on another host of the swarm: a person's answer
/// travels there over the bridge and is checked and sent there
/// (docs/bridge.md, "One control").
fn answer_elsewhere(project: &crate::protocol::layout::Project, args: &Args) -> i32 {
    let sent = crate::agent::caller::Caller::of(project)
        .and_then(|c| c.require_person("swarm answer for a clarify on another host"))
        .and_then(|()| {
            crate::bridge::swarmwide::answer_elsewhere(
                project,
                &args.id,
                &args.choices,
                args.text.as_deref(),
            )
        });
    match sent {
        Ok(Some(c)) => {
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "sent", "clarify": args.id, "control": c.id,
                }));
            } else {
                crate::cli::out(&format!(
                    "ANSWER SENT: {} has no copy on this host; the host holding it answers and checks the choices\n{}",
                    args.id,
                    crate::bridge::control::sent_line(Some(&c))
                ));
            }
            exit::OK
        }
        Ok(None) => crate::cli::report(&Error::not_found("this swarm has no bridge"), args.json),
        Err(e) => crate::cli::report(&e, args.json),
    }
}
