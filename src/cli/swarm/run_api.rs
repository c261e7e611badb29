//! `swarm run-api --role R`: the built-in agent of an `agent: api` role
//! (started by `swarm up`): drains the role's queue with one chat completion
//! per item that needs an answer, then exits (crates/swarm-doors/src/doors/api/).

use std::io::Write;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The role to act as (default: SWARMFORGE_ROLE); its swarm.yaml entry
    /// must say `agent: api`
    #[arg(long)]
    pub role: Option<String>,
    /// Run a role that is not `agent: api` against this server (with
    /// --model): what the examples do when SWARM_MODEL_URL is set
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model to ask (with --base-url; default: the role's `model:`)
    #[arg(long, requires = "base_url")]
    pub model: Option<String>,
    /// The environment variable holding the API key (with --base-url)
    #[arg(long, value_name = "VAR", requires = "base_url")]
    pub api_key_env: Option<String>,
}

pub fn run(args: Args) -> i32 {
    let role = match crate::protocol::root::named_or_acting_role(args.role) {
        Ok(r) => r,
        Err(e) => return crate::cli::report(&e, false),
    };
    let cwd = match crate::protocol::root::current_dir() {
        Ok(c) => c,
        Err(e) => return crate::cli::report(&e, false),
    };
    let over = crate::doors::api::Overrides {
        base_url: args.base_url,
        model: args.model,
        api_key_env: args.api_key_env,
    };
    let runner = match crate::doors::api::Runner::new(&cwd, &role, &over) {
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
                "{role}: {} ({} items, {} calls, {} sent, {} failed)",
                if s.parked { "parked" } else { "queue empty" },
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
