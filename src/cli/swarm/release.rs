//! `swarm release [<glob>...]`: give back this role's reservations (all of
//! them, or the globs named) (docs/reservations.md).

use crate::error::Result;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The globs to release, as reserved (default: all of this role's)
    #[arg(value_name = "GLOB")]
    pub globs: Vec<String>,
    /// The role releasing (default: SWARMFORGE_ROLE, else this worktree's role)
    #[arg(long = "as", value_name = "ROLE")]
    pub role: Option<String>,
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

fn act(args: &Args) -> Result<(String, Vec<String>)> {
    let (at, role) = super::reserve::acting(args.role.as_deref(), "swarm release")?;
    let globs = super::reserve::typed_globs(&at, &args.globs)?;
    // A confined agent asks handoffd (docs/reservations.md).
    let gone = crate::forum::requests::release(&at.project, &role, &globs)?;
    Ok((role, gone))
}

pub fn run(args: Args) -> i32 {
    match act(&args) {
        Ok((role, gone)) => {
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "ok", "role": role, "released": gone,
                }));
            } else if gone.is_empty() {
                crate::cli::out(&format!("RELEASED: nothing ({role} held no reservation)\n"));
            } else {
                crate::cli::out(&format!(
                    "RELEASED: {} ({role})\n",
                    crate::text::escape(&gone.join(" "))
                ));
            }
            crate::error::exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
