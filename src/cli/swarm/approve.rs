//! `swarm approve <id>`: deliver a held handoff (docs/cockpit.md), exactly
//! as the person reviewed it (docs/security.md, "Approve what was seen").

use std::io::{BufRead, IsTerminal, Write};

use crate::bridge::control;
use crate::bridge::swarmwide::Decided;
use crate::error::{exit, Error};
use crate::person::holds;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
A handoff whose sender or type has `approval: required` in swarm.yaml waits \
in its sender's .swarmforge/handoffs/pending_approval/ until a person decides. approve \
shows the held message (headers and body, as it will be delivered) and its \
sha256; on a terminal it asks, otherwise it approves only with --sha256 \
naming what was reviewed. The approval (.swarmforge/approvals/<id>) binds \
that sha256: content changed after the review is refused now \
(CHANGED_SINCE_REVIEW) or held again by the daemon. The original then goes \
back to its outbox and is delivered the usual way, exactly once. Journaled \
as `approved`. Safe to repeat after a crash. A handoff held on another \
host of the swarm (`swarm status` lists it with its sha256) is approved \
there: the approval travels over the bridge and that host delivers the \
message only if it still holds exactly the content reviewed \
(docs/bridge.md, \"One control\"). An approval here is sent to every host \
too, so the copies relayed from here are not held again there \
(docs/bridge.md, \"Approvals travel\").
Exit 0 approved; 1 no such held handoff, a bad id, not confirmed, or an \
environment error; 2 CHANGED_SINCE_REVIEW, or PERSON_ONLY (run by an agent, \
docs/security.md).")]
pub struct Args {
    /// The held message's id (`<IDTS>_<SEQ>_from_<sender>`, or a unique prefix of it); `swarm status` lists them
    pub id: String,
    /// The sha256 of the message reviewed (shown by `swarm approve <id>`,
    /// `swarm status --json` and the cockpit)
    #[arg(long, value_name = "HEX")]
    pub sha256: Option<String>,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    // A person's command, for a held id (or a unique prefix of one).
    let (project, id) = match super::project(None).and_then(|p| {
        crate::agent::caller::Caller::of(&p)?.require_person("swarm approve")?;
        let id = crate::protocol::idprefix::expand(&p, &args.id)?;
        Ok((p, id))
    }) {
        Ok(x) => x,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    let args = Args { id, ..args };
    if holds::find(&project, &args.id).is_err() {
        if let Some(r) = crate::bridge::control_view::held_by_id(&project, &args.id) {
            return approve_remote(&project, &r, &args);
        }
    }
    let seen = match &args.sha256 {
        Some(s) => s.clone(),
        None => match confirm(&project, &args.id, args.json) {
            Ok(Some(s)) => s,
            Ok(None) => return exit::ENV,
            Err(e) => return crate::cli::report(&e, args.json),
        },
    };
    match crate::bridge::swarmwide::approve(&project, &args.id, &seen, "cli") {
        Ok(Decided::Here(path, sent)) => {
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "approved", "id": args.id, "sha256": seen, "path": path,
                    "control": control::json_id(sent.as_ref()),
                }));
            } else {
                crate::cli::out(&format!(
                    "APPROVED: {}\n{}",
                    path.display(),
                    control::sent_line(sent.as_ref())
                ));
            }
            exit::OK
        }
        // Gone from here meanwhile, held elsewhere: sent there.
        Ok(Decided::Elsewhere(host, c)) => {
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "sent", "id": args.id, "sha256": seen, "host": host,
                    "control": c.id,
                }));
            } else {
                crate::cli::out(&format!(
                    "APPROVAL SENT: {} is held on host {host}\n{}",
                    args.id,
                    control::sent_line(Some(&c))
                ));
            }
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}

/// Approval of a handoff held on another host: the person reviews the
/// mirrored copy; the control carries the fingerprint reviewed, and that
/// host approves only if its held copy still has it (docs/bridge.md, "One
/// control").
fn approve_remote(
    project: &crate::protocol::layout::Project,
    r: &crate::bridge::control::RemoteHeld,
    args: &Args,
) -> i32 {
    let seen = match &args.sha256 {
        Some(s) => s.clone(),
        None => match confirm_shown(
            &r.held.path,
            &r.held.text,
            &r.held.sha256,
            &args.id,
            args.json,
        ) {
            Some(s) => s,
            None => return exit::ENV,
        },
    };
    match control::approve_elsewhere(project, r, &seen) {
        Ok(c) => {
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "sent", "id": args.id, "sha256": seen, "host": r.host,
                    "control": c.id,
                }));
            } else {
                crate::cli::out(&format!(
                    "APPROVAL SENT: {} is held on host {}; it approves exactly the content reviewed\n{}",
                    args.id,
                    r.host,
                    control::sent_line(Some(&c))
                ));
            }
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}

/// Shows the held message; on a terminal asks, and returns the fingerprint
/// shown when the person says yes. Elsewhere (or on no) nothing is approved.
fn confirm(
    project: &crate::protocol::layout::Project,
    id: &str,
    json: bool,
) -> Result<Option<String>, Error> {
    let (h, msg) = holds::review(project, id)?;
    let fp = crate::daemon::gate::fingerprint(&msg);
    Ok(confirm_shown(&h.path, &msg.render(), &fp, id, json))
}

fn confirm_shown(
    path: &std::path::Path,
    rendered: &str,
    fp: &str,
    id: &str,
    json: bool,
) -> Option<String> {
    let hint = format!("swarm approve {id} --sha256 {fp}");
    if json {
        crate::cli::emit_json(serde_json::json!({
            "status": "review", "id": id, "sha256": fp, "path": path,
            "message": rendered, "approve": hint,
        }));
    } else {
        crate::cli::out(&format!(
            "HELD: {}\n{}\nsha256: {fp}\n",
            path.display(),
            crate::text::escape_lines(rendered.trim_end())
        ));
    }
    let terminal = std::io::stdin().is_terminal() && !json;
    if terminal {
        eprint!("Approve exactly this message? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        if matches!(line.trim(), "y" | "Y" | "yes") {
            return Some(fp.to_string());
        }
        eprintln!("swarm approve: not approved.");
        return None;
    }
    eprintln!(
        "swarm approve: nothing approved yet. Read the message above; to approve exactly it:\n  {hint}"
    );
    None
}
