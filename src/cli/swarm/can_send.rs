//! `swarm can-send --discussion <id>`: exit 0 when it is the caller's
//! (`SWARMFORGE_ROLE`) turn in an open discussion, 1 otherwise. No output, no
//! side effects, so an agent can skip work when it is not its turn.

use std::path::PathBuf;

use crate::forum::discussion;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long)]
    pub discussion: String,
    /// Project root (default: found from the current directory)
    #[arg(long)]
    pub root: Option<PathBuf>,
}

pub fn run(args: Args) -> i32 {
    let Ok(role) = crate::protocol::root::acting_role() else {
        return 1;
    };
    let Ok(project) = super::project(args.root.as_deref()) else {
        return 1;
    };
    match discussion::refusal(&project, &args.discussion, &role) {
        Ok(None) => 0,
        _ => 1,
    }
}
