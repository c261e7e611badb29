//! `swarm can-send --discussion <id>`: exit 0 when it is the caller's
//! (`SWARMFORGE_ROLE`) turn in an open discussion, 1 otherwise. Silent when it
//! is only someone else's turn (an agent polls it to skip work); an unknown
//! or closed discussion, or no role or project, is said on stderr.

use crate::forum::discussion;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long)]
    pub discussion: String,
}

pub fn run(args: Args) -> i32 {
    let at = crate::protocol::root::acting_role()
        .and_then(|role| super::project(None).map(|p| (role, p)));
    let (role, project) = match at {
        Ok(x) => x,
        Err(e) => return crate::cli::report(&e, false),
    };
    match discussion::refusal(&project, &args.discussion, &role) {
        Ok(None) => 0,
        Ok(Some(r)) if r.token == crate::error::Token::NotYourTurn => 1,
        Ok(Some(r)) => {
            eprintln!("{}: {}", r.token, r.detail);
            1
        }
        Err(e) => crate::cli::report(&e, false),
    }
}
