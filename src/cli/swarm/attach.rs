//! `swarm attach <role> [--choose N] [--print]`: open a role's tmux pane on
//! the swarm's private socket (to answer what its agent waits for), or
//! choose one option of the prompt it shows.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use crate::error::{exit, Error};
use crate::launch::attach;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The role whose pane to open
    pub role: String,
    /// Project root (default: found from the current directory)
    #[arg(long, value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// Choose option N (1-based, as `swarm status` lists them) of the prompt
    /// the pane shows now, with its exact keys; nothing is typed when the
    /// pane shows no prompt
    #[arg(long, value_name = "N")]
    pub choose: Option<usize>,
    /// Print the tmux command instead of running it
    #[arg(long)]
    pub print: bool,
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(args.root.as_deref()) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, false),
    };
    if let Some(n) = args.choose {
        return match attach::choose(&project, &args.role, n) {
            Ok((p, c)) => {
                crate::cli::out(&format!(
                    "{}: answered \"{}\" with \"{}\" (keys: {})\n",
                    args.role,
                    p.text,
                    c.label,
                    c.keys.join(" ")
                ));
                exit::OK
            }
            Err(e) => crate::cli::report(&e, false),
        };
    }
    let t = match attach::target(&project, &args.role) {
        Ok(t) => t,
        Err(e) => return crate::cli::report(&e, false),
    };
    let words = t.command();
    if args.print {
        crate::cli::out(&format!("{}\n", words.join(" ")));
        return exit::OK;
    }
    // Replaces this process: the person's terminal becomes the pane's.
    let err = std::process::Command::new(&words[0])
        .args(&words[1..])
        .env_remove("TMUX")
        .exec();
    crate::cli::report(&Error::process(format!("cannot run tmux: {err}")), false)
}
