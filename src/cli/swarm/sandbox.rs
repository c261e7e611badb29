//! `swarm sandbox`: what a confined agent's pane or supervisor runs at each
//! start of the agent (launch/confine/, `wrap_shell`). Not for people.

use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The project root
    #[arg(long)]
    pub project: PathBuf,
    /// The agent role whose sandbox to build
    #[arg(long)]
    pub role: String,
    /// The bubblewrap program
    #[arg(long)]
    pub bwrap: String,
    /// The shell command to run inside
    #[arg(last = true, required = true)]
    pub cmd: Vec<String>,
}

pub fn run(args: Args) -> i32 {
    let e =
        crate::launch::confine::exec(&args.project, &args.role, &args.bwrap, &args.cmd.join(" "));
    crate::cli::report(&e, false)
}
