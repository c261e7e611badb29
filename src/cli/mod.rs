//! Command-line front ends; each binary's `main` calls one `run` here.

pub mod done_current;
pub mod handoffd;
pub mod ready_next;
pub mod swarm;
pub mod swarm_handoff;

use crate::error::{exit, Error};

pub use crate::error::JSON_SCHEMA_VERSION as SCHEMA_VERSION;

pub use crate::error::stamped;

/// What `swarm --version` prints after the name: the version (Cargo.toml's)
/// and the commit the binary was built from (build.rs).
pub const VERSION_WITH_COMMIT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SWARM_BUILD_COMMIT"),
    ")"
);

/// Prints one JSON document (one line) on stdout, stamped with the schema.
pub fn emit_json(v: serde_json::Value) {
    out(&format!("{}\n", stamped(v)));
}

/// Prints an error the way every tool does: the message on stderr (control
/// characters already escaped by whoever built it) and, with `--json`, the
/// same facts as one JSON object on stdout. Returns the exit code.
pub fn report(err: &Error, json: bool) -> i32 {
    eprintln!("{err}");
    if json {
        emit_json(err.to_json());
    }
    err.exit_code()
}

/// A usage error as a JSON document, for `--json` callers whose arguments
/// clap refused (the text still goes to stderr).
fn usage_json(e: &clap::Error) -> serde_json::Value {
    let message = e.render().to_string();
    serde_json::json!({
        "status": "error",
        "token": "USAGE",
        "message": message.trim_end(),
        "paths": [],
        "exit_code": exit::ENV,
    })
}

/// Whether `--json` was asked for, looked up before parsing (so a usage
/// error can be answered in JSON too). Anything after `--` is an operand.
pub fn wants_json(args: &[std::ffi::OsString]) -> bool {
    let before_operands: Vec<_> = args.iter().skip(1).take_while(|a| *a != "--").collect();
    before_operands
        .iter()
        .any(|a| *a == "--json" || *a == "--format=jsonl")
        || before_operands
            .windows(2)
            .any(|w| w[0] == "--format" && w[1] == "jsonl")
}

/// The first command-line argument (after the program) that is not valid
/// UTF-8, as a usage error naming it with its bytes escaped; `None` when
/// every one is. Roles, headers and the paths this toolkit prints are UTF-8,
/// so such an argument is refused up front, never misread.
pub fn non_utf8_argument(args: &[std::ffi::OsString]) -> Option<Error> {
    let (i, bad) = args
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| a.to_str().is_none())?;
    let mut shown = String::new();
    for chunk in bad.as_encoded_bytes().utf8_chunks() {
        shown.push_str(&crate::text::escape(chunk.valid()));
        for b in chunk.invalid() {
            shown.push_str(&format!("\\x{b:02X}"));
        }
    }
    Some(Error::bad_input(format!(
        "argument {i} is not valid UTF-8: {shown}\n  hint: name files and folders with UTF-8 paths"
    )))
}

/// Parses `args` with `cmd` for a binary that keeps its own texts (the
/// agent helper and the daemon answer as SwarmForge's do): `--help` prints
/// `help()`, `--version` `<name> <version>`, and any other refusal is
/// `usage()`'s answer (its exit code).
pub fn parse_own(
    cmd: clap::Command,
    args: &[std::ffi::OsString],
    help: impl FnOnce() -> String,
    usage: impl FnOnce() -> i32,
) -> Result<clap::ArgMatches, i32> {
    use clap::error::ErrorKind;
    let name = cmd.get_name().to_string();
    cmd.try_get_matches_from(args).map_err(|e| match e.kind() {
        ErrorKind::DisplayHelp => {
            out(&help());
            exit::OK
        }
        ErrorKind::DisplayVersion => {
            out(&format!("{name} {}\n", env!("CARGO_PKG_VERSION")));
            exit::OK
        }
        _ => usage(),
    })
}

/// clap's colour choice under the same rule: clap's own detection looks at
/// the stream it writes to but not every variable the same way.
pub fn clap_colour() -> clap::ColorChoice {
    if crate::text::colour_stderr() {
        clap::ColorChoice::Auto
    } else {
        clap::ColorChoice::Never
    }
}

/// Parses clap arguments; a usage error exits 1 (SwarmForge's code for usage),
/// `--help`/`--version` exit 0. With `--json` a usage error is also one JSON
/// object on stdout.
pub fn parse_args<T: clap::Parser>() -> Result<T, i32> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json = wants_json(&args);
    let parsed = T::command()
        .color(clap_colour())
        .try_get_matches_from(&args)
        .and_then(|m| T::from_arg_matches(&m));
    match parsed {
        Ok(t) => Ok(t),
        Err(e) => {
            let code = if e.use_stderr() { exit::ENV } else { exit::OK };
            let _ = e.print();
            if json && e.use_stderr() {
                emit_json(usage_json(&e));
            }
            Err(code)
        }
    }
}

/// Every binary's clap definition, the one each parses its command line
/// with, for completions and man pages.
pub fn commands() -> Vec<clap::Command> {
    use clap::CommandFactory;
    vec![
        swarm::Cli::command(),
        swarm_handoff::command(),
        ready_next::Args::command(),
        done_current::Args::command(),
        handoffd::command(),
    ]
}

/// Writes to stdout, ignoring a closed pipe (`ready-next | head`).
pub fn out(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}
