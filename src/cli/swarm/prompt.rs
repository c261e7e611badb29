//! `swarm prompt <role> [--size]`: exactly what the role's agent is told.

use crate::error::exit;
use crate::launch::plan::Plan;
use crate::launch::primer;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The role
    pub role: String,
    /// Also print the primer's size (bytes, approximate tokens) on stderr
    #[arg(long)]
    pub size: bool,
    /// One JSON object (role, text, bytes, approx_tokens) instead of the text
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    let text = super::up_root(None)
        .and_then(|root| Plan::load(&root))
        .and_then(|plan| primer::primer(&plan, &args.role));
    match text {
        Ok(t) if args.json => {
            crate::cli::emit_json(serde_json::json!({
                "role": args.role,
                "text": t,
                "bytes": t.len(),
                "approx_tokens": primer::approx_tokens(&t),
            }));
            exit::OK
        }
        Ok(t) => {
            crate::cli::out(&t);
            if args.size {
                eprintln!(
                    "{} bytes, about {} tokens (bytes/4)",
                    t.len(),
                    primer::approx_tokens(&t)
                );
            }
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
