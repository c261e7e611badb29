//! `swarm-handoff [--json] <draft-file>` (SwarmForge's `swarm_handoff.sh`).

use crate::agent::send::{self, SendError};
use crate::error::exit;
use crate::protocol::draft::{self, USAGE};

pub fn run(args: Vec<String>) -> i32 {
    let mut json = false;
    let mut positional = Vec::new();
    for a in args {
        match a.as_str() {
            "--json" => json = true,
            "-h" | "--help" => {
                super::out(USAGE);
                return exit::OK;
            }
            "-V" | "--version" => {
                super::out(&format!("swarm-handoff {}\n", env!("CARGO_PKG_VERSION")));
                return exit::OK;
            }
            _ => positional.push(a),
        }
    }
    if positional.len() != 1 {
        eprint!("{USAGE}");
        if json {
            let v = serde_json::json!({
                "status": "error",
                "token": "USAGE",
                "message": format!("expected one draft file, got {}", positional.len()),
                "paths": [],
                "exit_code": exit::ENV,
            });
            super::out(&format!("{v}\n"));
        }
        return exit::ENV;
    }
    let arg = &positional[0];
    let cwd = match crate::protocol::root::current_dir() {
        Ok(c) => c,
        Err(e) => return super::report(&e, json),
    };
    match send::queue(arg, &cwd) {
        Ok(q) => {
            if json {
                let mut v = serde_json::to_value(&q).unwrap_or_default();
                v["status"] = serde_json::json!("queued");
                super::out(&format!("{v}\n"));
            } else {
                super::out(&format!("HANDOFF QUEUED: {}\n", q.path.display()));
            }
            if let Some(w) = send::discard_draft(arg, &cwd) {
                eprintln!("{w}");
            }
            exit::OK
        }
        Err(SendError::Invalid {
            draft: shown,
            errors,
        }) => {
            eprint!("{}", draft::invalid_report(&shown, &errors));
            if json {
                let v = serde_json::json!({
                    "status": "invalid",
                    "token": "HANDOFF INVALID",
                    "draft": shown,
                    "errors": errors,
                    "exit_code": exit::REFUSED,
                });
                super::out(&format!("{v}\n"));
            }
            exit::REFUSED
        }
        Err(SendError::Other(e)) => super::report(&e, json),
    }
}
