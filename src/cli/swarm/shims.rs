//! `swarm shims <dir>`: write the SwarmForge-named wrapper scripts into a folder.

use std::path::PathBuf;

use crate::error::exit;
use crate::launch::shims;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Existing folder to write the wrappers into; put it first on the agents' PATH
    pub dir: PathBuf,
    /// Print one JSON object (the paths written) instead of text
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    let result = shims::own_bin_dir().and_then(|bin| shims::install(&args.dir, &bin));
    match result {
        Ok(paths) if args.json => {
            crate::cli::emit_json(serde_json::json!({ "paths": paths }));
            exit::OK
        }
        Ok(paths) => {
            let mut text = String::new();
            for p in paths {
                text.push_str(&format!("{}\n", p.display()));
            }
            crate::cli::out(&text);
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
