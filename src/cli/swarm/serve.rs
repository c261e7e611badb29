//! `swarm serve [--port N] [--bind ADDR] [--allow-remote]`: the cockpit.

use std::io::Write;
use std::net::IpAddr;

use crate::error::exit;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Serves a live web page for the people running the swarm: the board (one card \
per role), the transcript, the attention panel (clarifies to answer, held \
handoffs to approve or deny, dead agents), queue depth and latency charts, \
the pipeline graph, pause/resume, and posting as a human role. Every action \
writes the same files as the CLI command of the same name.
A random token is created at each start (.swarmforge/serve/token, mode 0600) \
and printed in the URL on stdout (`COCKPIT: <url>`); every request needs it. \
Listens on 127.0.0.1 unless --bind names another address, which also needs \
--allow-remote. Runs until interrupted. See docs/cockpit.md.
Exit 1 when the address is refused or cannot be bound.")]
pub struct Args {
    /// Port to listen on (0: any free port)
    #[arg(long, default_value_t = 8765)]
    pub port: u16,
    /// Address to listen on
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Allow a non-loopback --bind (anyone who can reach it and has the token can act)
    #[arg(long)]
    pub allow_remote: bool,
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(None) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, false),
    };
    let opts = crate::serve::Options {
        bind: args.bind,
        port: args.port,
        allow_remote: args.allow_remote,
    };
    let mut print = |url: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "COCKPIT: {url}");
        let _ = out.flush();
    };
    match crate::serve::run(project, &opts, &mut print) {
        Ok(()) => exit::OK,
        Err(e) => crate::cli::report(&e, false),
    }
}
