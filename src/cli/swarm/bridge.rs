//! `swarm bridge [root]`: this host's end of a swarm across hosts
//! (docs/bridge.md).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::bridge::{self, Settings};
use crate::error::exit;

#[derive(clap::Args, Debug)]
#[command(
    long_about = "Runs this host's bridge: publishes the copies handoffd delivered into the \
proxy inboxes of roles on other hosts to NATS JetStream, writes the messages for this \
host's roles into their inboxes, and publishes and mirrors every host's events. \
`swarm up` starts it when swarm.yaml sets `bridge:`. Logs to .swarmforge/bridge/bridge.log. \
Credentials come from `bridge_credentials_file`, SWARM_NATS_CREDS or SWARM_NATS_TOKEN. \
See docs/bridge.md."
)]
pub struct Args {
    #[command(flatten)]
    pub root: super::RootArg,
}

pub fn run(args: Args) -> i32 {
    let result = super::project(args.root.path()).and_then(|p| Settings::load(&p));
    let settings = match result {
        Ok(s) => s,
        Err(e) => return crate::cli::report(&e, false),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    match bridge::run(settings, stop) {
        Ok(()) => exit::OK,
        Err(e) => crate::cli::report(&e, false),
    }
}
