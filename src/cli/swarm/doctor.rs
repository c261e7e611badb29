//! `swarm doctor [root] [--json]`: the project's set-up checked as a whole.

use std::path::PathBuf;

use crate::error::exit;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Runs every check (the project and its config, shared inboxes, mail for a \
person left in another inbox, launcher files git does not ignore, missing \
agent CLIs, agent CLI trust, each agent's sandbox, the tmux socket, the \
daemon, logs, disk space, clock skew, `swarm audit --check`) and prints each \
finding with its code and how to fix it. A config that does not load is one \
finding; before `swarm init` the report says so and checks the rest. The \
codes are stable (docs/doctor.md).
Exit 0 healthy; 1 with findings, or when the project cannot be read.")]
pub struct Args {
    /// Project root or any folder inside it (default: the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// One JSON object: {"healthy", "checks": [{"check", "findings": [{"code", "message", "fix", "path"}]}]};
    /// with findings also the error fields (token FINDINGS, exit_code 1)
    #[arg(long)]
    pub json: bool,
}

/// The project named (or found from the current directory); where there is
/// none yet, the folder `swarm init` would make one of, so the report says
/// so and still checks what needs no project.
fn project(root: Option<&std::path::Path>) -> crate::Result<crate::protocol::layout::Project> {
    match super::project(root) {
        Err(crate::Error::NotFound(_)) => {
            super::init_root(root).map(crate::protocol::layout::Project::new)
        }
        other => other,
    }
}

pub fn run(args: Args) -> i32 {
    let report = match project(args.root.as_deref()).and_then(|p| crate::doctor::run(&p)) {
        Ok(r) => r,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    if args.json {
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        if report.healthy {
            v["status"] = serde_json::json!("healthy");
        } else {
            // Unhealthy is a failure by the JSON convention (docs/json.md):
            // the report also carries the error object's fields.
            let findings: Vec<&crate::doctor::Finding> =
                report.checks.iter().flat_map(|c| &c.findings).collect();
            v["status"] = serde_json::json!("findings");
            v["token"] = serde_json::json!("FINDINGS");
            v["message"] = serde_json::json!(format!(
                "{} finding(s) in {}",
                findings.len(),
                report.root.display()
            ));
            v["paths"] = serde_json::json!(findings
                .iter()
                .filter_map(|f| f.path.as_ref())
                .collect::<Vec<_>>());
            v["exit_code"] = serde_json::json!(exit::ENV);
        }
        crate::cli::emit_json(v);
    } else {
        crate::cli::out(&crate::doctor::text(&report));
    }
    if report.healthy {
        exit::OK
    } else {
        exit::ENV
    }
}
