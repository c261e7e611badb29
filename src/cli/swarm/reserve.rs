//! `swarm reserve <glob>... [--ttl D] [--reason R]`: announce the files
//! this role is about to change (docs/reservations.md).

use crate::agent::caller::Caller;
use crate::error::{Error, Result};
use crate::protocol::root::Located;
use crate::reservations::{self, glob, guard, Reservation};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Globs are paths of the repository (the same in every role's worktree), relative to the folder \
you run in: `*` and `?` within a path segment, `**` for any number of segments. A glob that \
leaves the project is refused. Refused (exit 2, RESERVED) when another role holds an \
overlapping glob, naming it; --force takes it anyway. Stored as one file per reservation \
in .swarmforge/reservations/. From a confined agent, handoffd takes it in the agent's own name.")]
pub struct Args {
    /// The files, as globs (src/parser/**, README.md)
    #[arg(value_name = "GLOB", required = true)]
    pub globs: Vec<String>,
    /// How long it holds (90s, 30m, 2h, 1d; at most 30d)
    #[arg(long, value_name = "D", default_value = "1h")]
    pub ttl: String,
    /// Why (one line, shown to the others)
    #[arg(long, value_name = "R", default_value = "")]
    pub reason: String,
    /// Take it even when another role holds an overlapping glob
    #[arg(long)]
    pub force: bool,
    /// The role reserving (default: SWARMFORGE_ROLE, else this worktree's role)
    #[arg(long = "as", value_name = "ROLE")]
    pub role: Option<String>,
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

/// Where the command stands and the role it acts as: `--as`, else the role
/// found as the agent helpers find it (SWARMFORGE_ROLE, else this
/// worktree's). Either way the caller is asked who it is (its ancestry, not
/// the variable alone): a person may act as any role, an agent only as its
/// own (`PERSON_ONLY`), so no agent reserves in another's name or releases
/// another's reservation. A confined agent's write is made by handoffd in
/// the sandbox's role's name (forum/requests.rs). `what` names the command
/// in the refusal.
pub fn acting(named: Option<&str>, what: &str) -> Result<(Located, String)> {
    let at = super::located(None)?;
    let roles = crate::protocol::roles::Roles::load(&at.project.roles_tsv())?;
    let role = match named {
        Some(r) => {
            if roles.find(r).is_none() {
                return Err(Error::not_found(format!(
                    "Unknown role: {}{}",
                    crate::text::escape(r),
                    roles.unknown_hint(&at.project.roles_tsv())
                )));
            }
            r.to_string()
        }
        None => match guard::me(&at.project, &at.worktree.root)? {
            Some(r) => r,
            None => {
                return Err(Error::bad_input(format!(
                    "cannot tell which role you are in {}: no SWARMFORGE_ROLE, and roles.tsv gives this worktree no single role\n  hint: pass --as ROLE",
                    at.worktree.root.display()
                )))
            }
        },
    };
    let human = roles.find(&role).is_some_and(|r| r.is_human());
    Caller::detect()
        .people_as_persons(&roles)
        .require_acting_as(&role, human, what)?;
    Ok((at, role))
}

/// The globs as typed here, as repository paths.
pub fn typed_globs(at: &Located, typed: &[String]) -> Result<Vec<String>> {
    let cwd = crate::protocol::root::current_dir()?;
    glob::normalise_all(typed, &at.worktree.root, &cwd).map_err(Error::bad_input)
}

/// The reservation as JSON and as a line.
pub fn as_json(r: &Reservation) -> serde_json::Value {
    serde_json::to_value(r).unwrap_or_default()
}

fn act(args: &Args) -> Result<(Reservation, Vec<Reservation>)> {
    let (at, role) = acting(args.role.as_deref(), "swarm reserve")?;
    let wt = &at.worktree.root;
    let globs = typed_globs(&at, &args.globs)?;
    let ttl = crate::protocol::duration::parse(&args.ttl)
        .map_err(|e| Error::bad_input(format!("--ttl: {e}")))?;
    // A confined agent asks handoffd (docs/reservations.md).
    crate::forum::requests::reserve(
        &at.project,
        &reservations::Request {
            role: &role,
            globs,
            ttl,
            reason: &args.reason,
            worktree: wt,
            force: args.force,
        },
    )
}

pub fn run(args: Args) -> i32 {
    match act(&args) {
        Ok((r, overlaps)) => {
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "ok",
                    "reservation": as_json(&r),
                    "overlaps": overlaps.iter().map(as_json).collect::<Vec<_>>(),
                }));
            } else {
                let mut s = format!("RESERVED: {} {}\n", r.id, r.describe());
                for o in &overlaps {
                    s.push_str(&format!(
                        "  overlapping (taken with --force): {}\n",
                        o.describe()
                    ));
                }
                crate::cli::out(&s);
            }
            crate::error::exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
