//! `swarm can-send --discussion <id>`: exit 0 when it is the caller's
//! (`SWARMFORGE_ROLE`) turn in an open discussion, 1 otherwise. No output, no
//! side effects, so an agent can skip work when it is not its turn.

use crate::forum::discussion;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long)]
    pub discussion: String,
}

pub fn run(args: Args) -> i32 {
    let Ok(role) = crate::protocol::root::acting_role() else {
        return 1;
    };
    let Ok(project) = super::project(None) else {
        return 1;
    };
    match discussion::refusal(&project, &args.discussion, &role) {
        Ok(None) => 0,
        _ => 1,
    }
}
