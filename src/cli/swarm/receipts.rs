//! `swarm receipts <id> [root]`: one message's state at each recipient.

use std::path::PathBuf;

use crate::error::{exit, Error};
use crate::text::escape;
use crate::views::receipts;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Prints the message (from, to, type, created_at), where its original is \
(sent/, failed/ with the reason from its .error note, or still in the outbox), \
then one row per recipient: state (new, in_process, completed or missing) and \
its enqueued_at, dequeued_at and completed_at. `to: all` means every role but \
the sender. A copy at a role the `to` header does not name is marked (cc) when
the message names that role in `cc`, else (not in to).
Exit 1 when no file carries the id.")]
pub struct Args {
    /// The message id (`<IDTS>_<SEQ>_from_<sender>`, or a unique prefix of it) or its file name
    pub id: String,
    /// Project root or any folder inside it (default: the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

/// The id as given, or the id inside a queue file name
/// (`<NN>_<id>_to_<recipients>.handoff`, possibly with a collision prefix).
fn id_of(arg: &str) -> String {
    let name = arg.rsplit('/').next().unwrap_or(arg);
    match crate::protocol::grammar::FileName::parse(name) {
        Some(f) => f.id.to_string(),
        None => arg.to_string(),
    }
}

pub fn run(args: Args) -> i32 {
    let mut id = id_of(&args.id);
    let result = super::project(args.root.as_deref()).and_then(|project| {
        id = crate::protocol::idprefix::expand(&project, &id)?;
        receipts::trail_of(&project, &id)
    });
    let t = match result {
        Ok(t) => t,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    let Some(r) = receipts::collect(&t, &id) else {
        let e = Error::not_found(format!(
            "no message with id '{}' in {}",
            escape(&id),
            escape(&t.project.root.display().to_string())
        ));
        return crate::cli::report(&e, args.json);
    };
    if args.json {
        crate::cli::emit_json(receipts::json(&r));
    } else {
        crate::cli::out(&receipts::text(&r));
    }
    exit::OK
}

#[cfg(test)]
mod tests {
    use super::id_of;

    #[test]
    fn ids_from_file_names() {
        let id = "20260615T140531Z_000042_from_architect";
        assert_eq!(id_of(id), id);
        assert_eq!(id_of(&format!("00_{id}_to_coder_QA.handoff")), id);
        assert_eq!(
            id_of(&format!(
                "/x/sent/2026-06-15T14:05:32.1Z_00_{id}_to_coder.handoff"
            )),
            id
        );
    }
}
