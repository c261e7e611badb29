//! `swarm a2a [--port N] [--bind ADDR] [--allow-remote]`: the roles as A2A agents.

use std::io::Write;
use std::net::IpAddr;

use crate::error::exit;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Serves every role with `a2a: true` in swarm.yaml as an A2A v1.0 agent \
(JSON-RPC over HTTP, SSE streaming, webhook push): its Agent Card at \
/a2a/<role>/.well-known/agent-card.json, the swarm's at \
/.well-known/agent-card.json. Each A2A task is a handoff from the role named \
by `a2a: {sender: <role>}`, queued exactly once per A2A message id; its state \
is the handoff's life. Every request needs `Authorization: Bearer <token>`, \
the token in .swarmforge/a2a/token (mode 0600, made once and kept); it is \
never printed. Prints `A2A: <base url>` on stdout once listening, and runs \
until interrupted. Listens on 127.0.0.1 unless --bind names another address, \
which also needs --allow-remote. See docs/a2a.md.
Exit 1 when the setup is incomplete, another `swarm a2a` serves the project, \
or the address is refused or cannot be bound.")]
pub struct Args {
    /// Port to listen on (0: any free port)
    #[arg(long, default_value_t = 8766)]
    pub port: u16,
    /// Address to listen on
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Allow a non-loopback --bind (anyone who can reach it and has the token can hand work)
    #[arg(long)]
    pub allow_remote: bool,
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(None) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, false),
    };
    let opts = crate::a2a::Options {
        bind: args.bind,
        port: args.port,
        allow_remote: args.allow_remote,
    };
    let mut print = |url: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "A2A: {url}");
        let _ = out.flush();
    };
    match crate::a2a::run(project, &opts, &mut print) {
        Ok(()) => exit::OK,
        Err(e) => crate::cli::report(&e, false),
    }
}
