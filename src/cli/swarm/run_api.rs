//! `swarm run-api --role R`: the built-in agent of an `agent: api` role
//! (started by `swarm up`): drains the role's queue with one chat completion
//! per item that needs an answer, then exits (src/launch/api/).

use std::io::Write;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The role to act as (default: SWARMFORGE_ROLE); its swarm.yaml entry
    /// must say `agent: api`
    #[arg(long)]
    pub role: Option<String>,
}

pub fn run(args: Args) -> i32 {
    let role = match args
        .role
        .map(Ok)
        .unwrap_or_else(crate::protocol::root::acting_role)
    {
        Ok(r) => r,
        Err(e) => return crate::cli::report(&e, false),
    };
    let cwd = match crate::protocol::root::current_dir() {
        Ok(c) => c,
        Err(e) => return crate::cli::report(&e, false),
    };
    let runner = match crate::launch::api::Runner::new(&cwd, &role) {
        Ok(r) => r,
        Err(e) => return crate::cli::report(&e, false),
    };
    let mut say = |line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", crate::text::escape(line));
        let _ = out.flush();
    };
    match runner.run(&mut say) {
        Ok(s) => {
            say(&format!(
                "{role}: queue empty ({} items, {} calls, {} sent, {} failed)",
                s.items,
                s.calls,
                s.sent.len(),
                s.failed
            ));
            0
        }
        Err(e) => crate::cli::report(&e, false),
    }
}
