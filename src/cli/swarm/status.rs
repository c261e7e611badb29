//! `swarm status [root] [--json]`.

use std::path::PathBuf;

use crate::error::exit;
use crate::views::status;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Project root (default: found from the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// One JSON object instead of the table
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(args.root.as_deref()) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    match status::collect(&project) {
        Ok(s) => {
            if args.json {
                crate::cli::emit_json(serde_json::to_value(&s).unwrap_or_default());
            } else {
                crate::cli::out(&status::text(&s));
            }
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
