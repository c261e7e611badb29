//! `swarm artifacts <id> [root]` / `swarm artifacts --session S [root]`.

use std::path::PathBuf;

use serde_json::json;

use crate::agent::artifacts::{self, Row};
use crate::error::{exit, Error};
use crate::protocol::trail::{Scope, Trail};
use crate::text::escape;
use crate::views::transcript;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Lists the files a message names with `artifact:` headers (or every message of \
a forum session): state, size, modified time, MIME type (guessed from the \
extension) and path, relative to the sender's worktree. Each file is checked \
again now: `ok` (same size and SHA-256 as when it was sent), `changed`, \
`missing`, `outside` (it now resolves outside the worktree), `not_a_file`, \
`unreadable`, `malformed` (a header that is not `<sha256> <size> <path>`).
No artifacts print nothing (with --json an empty list). Exit 0 listed \
(whatever the states); 1 usage, unknown id or an environment error.")]
pub struct Args {
    /// The message id, then optionally the project root (with --session: only the root)
    #[arg(value_name = "ID|ROOT", num_args = 0..=2)]
    pub args: Vec<String>,
    /// Every message of this forum session (its `session` header)
    #[arg(long, value_name = "S")]
    pub session: Option<String>,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

fn usage() -> Error {
    Error::bad_input("usage: swarm artifacts <id> [root] | swarm artifacts --session S [root]")
}

pub fn run(args: Args) -> i32 {
    let (id, root) = match (&args.session, args.args.as_slice()) {
        (Some(_), []) => (None, None),
        (Some(_), [r]) => (None, Some(PathBuf::from(r))),
        (None, [i]) => (Some(i.clone()), None),
        (None, [i, r]) => (Some(i.clone()), Some(PathBuf::from(r))),
        _ => return crate::cli::report(&usage(), args.json),
    };
    let mut id = id;
    let result = super::project(root.as_deref()).and_then(|project| {
        if let Some(i) = &mut id {
            *i = crate::protocol::idprefix::expand(&project, i)?;
        }
        let scope = Scope {
            name_contains: id.clone(),
            ..Scope::originals()
        };
        let mut t = Trail::load(&project, &scope)?;
        if let Some(i) = &id {
            if !t.originals.iter().any(|o| o.id() == i) {
                // A hand-made name without the id: the full scan.
                t = Trail::load(&project, &Scope::originals())?;
            }
        }
        Ok(t)
    });
    let t = match result {
        Ok(t) => t,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    let messages: Vec<_> = transcript::messages(&t.originals)
        .into_iter()
        .filter(|o| match (&id, &args.session) {
            (Some(i), _) => o.id() == i,
            (None, Some(s)) => o.msg.session() == Some(s.as_str()),
            _ => false,
        })
        .collect();
    if let Some(i) = &id {
        if messages.is_empty() {
            let e = Error::not_found(format!(
                "No message with id {} in {}.",
                escape(i),
                t.project.root.display()
            ));
            return crate::cli::report(&e, args.json);
        }
    }
    let rows: Vec<Row> = messages.iter().flat_map(|o| artifacts::rows(o)).collect();
    if args.json {
        let v = json!({
            "id": id,
            "session": args.session,
            "state": messages.first().filter(|_| id.is_some()).map(|o| o.place.as_str()),
            "artifacts": rows,
        });
        crate::cli::emit_json(v);
    } else {
        crate::cli::out(&artifacts::text(&rows, id.is_none()));
    }
    exit::OK
}
