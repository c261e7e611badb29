//! `swarm inbox [show <id> | done <id>] [--role R] [--json]`: a person's mail.

use clap::Subcommand;

use crate::agent::mailbox::{self, Entry, Listing};
use crate::error::{exit, Result};
use crate::protocol::config::Config;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::views::attention::short_age;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Lists the items waiting for a role (default: every human role), oldest first, \
with id, sender, type, age and summary, and the command that handles each. \
`show` prints one item whole; `done` completes it (completed_at stamped under \
the inbox lock, as done-current does), so receipts and `swarm audit` show the \
person handled it. A clarify is answered with `swarm answer`, not marked done. \
An id may be shortened to any unique prefix.
Only a person marks a person's item done; an agent (SWARMFORGE_ROLE in its \
own or a parent's environment, docs/security.md) only its own role's.
Exit 0 done; 1 usage or an environment error; 2 refused (UNKNOWN_ID, \
AMBIGUOUS_ID, NOT_WAITING_FOR_ROLE, CLARIFY_NEEDS_ANSWER, PERSON_ONLY: nothing \
changed).")]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    /// The role whose inbox to read (default: every human role)
    #[arg(long, global = true, value_name = "R")]
    pub role: Option<String>,
    /// One JSON object instead of text
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Print one waiting item whole
    Show {
        /// Its id, or a unique prefix of it
        id: String,
    },
    /// Mark one waiting item done (not a clarify: `swarm answer` it)
    Done {
        /// Its id, or a unique prefix of it
        id: String,
    },
}

struct Place {
    project: Project,
    roles: Roles,
    max_bytes: u64,
}

fn place() -> Result<Place> {
    let project = super::project(None)?;
    let roles = Roles::load(&project.roles_tsv())?;
    let max_bytes = Config::load(&project.config_file())?.limits.max_file_bytes;
    Ok(Place {
        project,
        roles,
        max_bytes,
    })
}

fn listing(p: &Place, role: Option<&str>) -> Result<Listing> {
    let chosen = mailbox::chosen(&p.roles, role, &p.project.roles_tsv())?;
    Ok(mailbox::list(&p.project, &chosen, p.max_bytes))
}

pub fn run(args: Args) -> i32 {
    let role = args.role.as_deref();
    let result = place().and_then(|p| match &args.action {
        None => listing(&p, role).map(|l| {
            if args.json {
                let mut v = serde_json::to_value(&l).unwrap_or_default();
                v["status"] = serde_json::json!("ok");
                crate::cli::emit_json(v);
            } else {
                crate::cli::out(&text(&l));
            }
        }),
        Some(Action::Show { id }) => {
            let l = listing(&p, role)?;
            let e = mailbox::pick(&p.project, &l, id, &p.roles, p.max_bytes)?;
            let bytes = crate::fsx::read_bounded(
                &e.path,
                p.max_bytes + crate::agent::queue::STAMP_HEADROOM,
            )
            .map_err(|err| crate::error::Error::bad_file(&e.path, format!("{err}")))?;
            let whole = String::from_utf8_lossy(&bytes).into_owned();
            if args.json {
                let mut v = serde_json::to_value(e).unwrap_or_default();
                v["status"] = serde_json::json!("ok");
                v["file"] = serde_json::json!(whole);
                crate::cli::emit_json(v);
            } else {
                crate::cli::out(&show_text(e, &whole));
            }
            Ok(())
        }
        Some(Action::Done { id }) => {
            // A person's item is the person's: asked of the caller's
            // ancestry, as `swarm answer` asks (docs/security.md).
            let l = listing(&p, role)?;
            let e = mailbox::pick(&p.project, &l, id, &p.roles, p.max_bytes)?;
            let human = p.roles.find(&e.role).is_some_and(|r| r.is_human());
            crate::agent::caller::Caller::detect()
                .people_as_persons(&p.roles)
                .require_acting_as(&e.role, human, "swarm inbox done")?;
            let (e, done) = mailbox::mark_done(&p.project, Some(&e.role), &e.id)?;
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "completed", "id": e.id, "role": e.role, "completed": done,
                }));
            } else {
                crate::cli::out(&format!("COMPLETED: {}\n", done.display()));
            }
            Ok(())
        }
    });
    match result {
        Ok(()) => exit::OK,
        Err(e) => crate::cli::report(&e, args.json),
    }
}

fn show_text(e: &Entry, whole: &str) -> String {
    let mut s = format!(
        "ID: {}\nFOR: {}\nPATH: {}\nHANDLE: {}\n\n",
        crate::text::escape(&e.id),
        e.role,
        crate::text::escape(&e.path.to_string_lossy()),
        e.handle
    );
    for line in whole.lines() {
        s.push_str(&crate::text::escape(line));
        s.push('\n');
    }
    s
}

/// The table, then the unreadable files (each with its path).
pub fn text(l: &Listing) -> String {
    let mut s = String::new();
    if l.items.is_empty() {
        let who = if l.roles.is_empty() {
            "a person (no human role)".to_string()
        } else {
            l.roles.join(", ")
        };
        s.push_str(&format!("Nothing waits for {who}.\n"));
    } else {
        s.push_str(&format!(
            "{:<40} {:<12} {:<12} {:<8} {:<10} {:>5}  SUMMARY\n",
            "ID", "FOR", "FROM", "TYPE", "STATE", "AGE"
        ));
        for e in &l.items {
            s.push_str(&format!(
                "{:<40} {:<12} {:<12} {:<8} {:<10} {:>5}  {}\n  -> {}\n",
                crate::text::escape(&e.id),
                e.role,
                crate::text::escape(&e.from),
                crate::text::escape(&e.kind),
                e.state,
                short_age(e.age_s),
                e.summary,
                e.handle
            ));
        }
    }
    for u in &l.unreadable {
        s.push_str(&format!(
            "unreadable (for {}): {}: {}\n",
            u.role,
            crate::text::escape(&u.path.to_string_lossy()),
            u.reason
        ));
    }
    s
}
