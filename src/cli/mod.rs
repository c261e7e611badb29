//! Command-line front ends; each binary's `main` calls one `run` here.

pub mod done_current;
pub mod handoffd;
pub mod ready_next;
pub mod swarm;
pub mod swarm_handoff;

use crate::error::{exit, Error};

/// Prints an error the way every tool does: the message on stderr (control
/// characters already escaped by whoever built it) and, with `--json`, the
/// same facts as one JSON object on stdout. Returns the exit code.
pub fn report(err: &Error, json: bool) -> i32 {
    eprintln!("{err}");
    if json {
        println!("{}", err.to_json());
    }
    err.exit_code()
}

/// Parses clap arguments; a usage error exits 1 (SwarmForge's code for usage),
/// `--help`/`--version` exit 0.
pub fn parse_args<T: clap::Parser>() -> Result<T, i32> {
    match T::try_parse() {
        Ok(t) => Ok(t),
        Err(e) => {
            let code = if e.use_stderr() { exit::ENV } else { exit::OK };
            let _ = e.print();
            Err(code)
        }
    }
}

/// Writes to stdout, ignoring a closed pipe (`ready-next | head`).
pub fn out(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}
