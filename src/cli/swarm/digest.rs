//! `swarm digest latest [--session S] [--json]`: the newest moderator digest of
//! a session (default: the open session, else the newest one).

use crate::protocol::header::names;
use clap::Subcommand;

use crate::error::{exit, Error};
use crate::forum::session;
use crate::protocol::header::Message;

pub type Args = super::Actions<Action>;

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Print the newest digest: its path, then the file
    Latest {
        #[arg(long)]
        session: Option<String>,
    },
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(None) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    let Action::Latest { session: wanted } = &args.action;
    let result = (|| {
        let id = match wanted {
            Some(s) => session::find(&project, s)?.id,
            None => {
                let all = session::list(&project)?;
                let open = all.iter().rev().find(|s| s.is_open()).or(all.last());
                open.map(|s| s.id.clone()).ok_or_else(|| {
                    Error::not_found("No session yet.\n  hint: swarm session start")
                })?
            }
        };
        let path = session::latest_digest(&project, &id)
            .ok_or_else(|| Error::not_found(format!("No digest in session {id} yet.")))?;
        let max = crate::protocol::config::Config::load(&project.config_file())?
            .limits
            .max_file_bytes;
        let bytes = crate::fsx::read_bounded(&path, max).map_err(|e| Error::bad_file(&path, e))?;
        let msg = Message::parse_bytes(&bytes).map_err(|e| Error::bad_file(&path, e))?;
        Ok::<_, Error>((id, path, msg))
    })();
    match result {
        Ok((id, path, msg)) => {
            if args.json {
                let v = serde_json::json!({
                    "session": id,
                    "path": path,
                    "id": msg.id(),
                    "from": msg.sender(),
                    "created_at": msg.get(names::CREATED_AT),
                    "body": msg.body,
                });
                crate::cli::emit_json(v);
            } else {
                crate::cli::out(&format!(
                    "LATEST_DIGEST: {}\n{}",
                    path.display(),
                    msg.render()
                ));
            }
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
