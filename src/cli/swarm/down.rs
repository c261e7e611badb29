//! `swarm down [root]`: stop the daemon, the agents and the tmux sessions.

use std::path::PathBuf;

use crate::error::exit;
use crate::launch;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Project root (default: the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// Print one JSON object (what was stopped) instead of text
    #[arg(long)]
    pub json: bool,
    #[arg(long, short, help = super::QUIET)]
    pub quiet: bool,
}

pub fn run(args: Args) -> i32 {
    let result = super::project(args.root.as_deref()).and_then(|p| launch::down(&p));
    match result {
        Ok(r) if args.json => {
            crate::cli::emit_json(serde_json::json!({
                "supervisor_pid": r.supervisor,
                "agents": r.agents,
                "daemon_pid": r.daemon,
                "sessions": r.sessions,
                "bridge_pid": r.bridge,
                "stray_pids": r.strays,
            }));
            exit::OK
        }
        Ok(_) if args.quiet => exit::OK,
        Ok(r) => {
            let mut text = String::new();
            if let Some(pid) = r.supervisor {
                text.push_str(&format!("stopped swarm up (pid {pid})\n"));
            }
            if !r.agents.is_empty() {
                text.push_str(&format!("stopped agents: {}\n", r.agents.join(" ")));
            }
            match (r.daemon, r.supervisor) {
                (Some(pid), _) => text.push_str(&format!("stopped handoffd (pid {pid})\n")),
                // The supervisor stops its own daemon and agents.
                (None, Some(_)) => {}
                (None, None) => text.push_str("handoffd was not running\n"),
            }
            if !r.sessions.is_empty() {
                text.push_str(&format!("killed tmux sessions: {}\n", r.sessions.join(" ")));
            }
            if !r.strays.is_empty() {
                let pids: Vec<String> = r.strays.iter().map(u32::to_string).collect();
                text.push_str(&format!(
                    "stopped processes agents left outside their group: {}\n",
                    pids.join(" ")
                ));
            }
            if let Some(pid) = r.bridge {
                text.push_str(&format!("stopped the bridge (pid {pid})\n"));
            }
            text.push_str("handoff files are untouched\n");
            crate::cli::out(&text);
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
