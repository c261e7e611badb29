//! `swarm-handoff [--json] <draft-file>` (SwarmForge's `swarm_handoff.sh`).

use std::path::Path;

use crate::agent::printout::{self, Viewer};
use crate::agent::queue::Done;
use crate::agent::send;
use crate::error::exit;
use crate::error::{Error, Result, Token};
use crate::protocol::draft::{self, USAGE};
use crate::protocol::header::Header;
use crate::protocol::{root, types};

/// The command line: `run` parses with it; `--help`, completions and man
/// pages are rendered from it. A bad command line still answers with
/// SwarmForge's usage text, byte for byte.
pub fn command() -> clap::Command {
    use clap::{Arg, ArgAction, Command};
    Command::new("swarm-handoff")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Queue a draft in this worktree's outbox for handoffd to deliver (SwarmForge's swarm_handoff.sh)")
        .override_usage("swarm-handoff [--json] <DRAFT_FILE>")
        .after_help(after_help())
        .args_override_self(true)
        .arg(
            Arg::new("json")
                .long("json")
                .action(ArgAction::SetTrue)
                .help("One JSON object on stdout (status, id, path, ...; errors too)"),
        )
        .arg(
            Arg::new("draft")
                .value_name("DRAFT_FILE")
                .required(true)
                // SwarmForge takes any one argument for the draft's path
                // (`-` or `--x` included) and says `Draft file not found`.
                .allow_hyphen_values(true)
                .value_hint(clap::ValueHint::FilePath)
                .help("The draft to queue"),
        )
}

pub fn run() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json = super::wants_json(&args);
    if let Some(e) = super::non_utf8_argument(&args) {
        return super::report(&e, json);
    }
    let usage = || {
        eprint!("{USAGE}");
        if json {
            let given = args.iter().skip(1).filter(|a| *a != "--json").count();
            super::emit_json(serde_json::json!({
                "status": "error",
                "token": "USAGE",
                "message": format!("expected one draft file, got {given}"),
                "paths": [],
                "exit_code": exit::ENV,
            }));
        }
        exit::ENV
    };
    let help = || command().render_help().to_string();
    let matches = match super::parse_own(command(), &args, help, usage) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let json = matches.get_flag("json");
    let Some(arg) = matches.get_one::<String>("draft") else {
        return exit::ENV; // clap requires it
    };
    let cwd = match root::current_dir() {
        Ok(c) => c,
        Err(e) => return super::report(&e, json),
    };
    match send::queue(arg, &cwd) {
        Ok(send::Sent::AuditRequired(c)) => {
            // SwarmForge's answer: exit 0, the draft stays for the second call.
            if json {
                super::emit_json(serde_json::json!({
                    "status": "audit_required",
                    "task": c.task,
                    "commit": c.commit,
                    "report": c.report(),
                }));
            } else {
                super::out(&c.report());
            }
            exit::OK
        }
        Ok(send::Sent::Queued(q, finished)) => queued(arg, &cwd, &q, finished, json),
        Err(Error::Invalid {
            subject: shown,
            errors,
            ..
        }) => invalid(&shown, &errors, json),
        Err(e) => super::report(&e, json),
    }
}

/// The draft is queued: its paths (and, with a `done` in it, the item
/// finished), the draft removed.
fn queued(
    arg: &str,
    cwd: &Path,
    q: &send::Queued,
    finished: Option<Result<Done>>,
    json: bool,
) -> i32 {
    let viewer = Viewer::default();
    if json {
        let mut v = serde_json::to_value(q).unwrap_or_default();
        v["status"] = serde_json::json!("queued");
        match &finished {
            Some(Ok(d)) => v["completed"] = printout::done_json(d, viewer),
            Some(Err(e)) => v["completed"] = e.to_json(),
            None => {}
        }
        super::emit_json(v);
    } else {
        super::out(&format!("HANDOFF QUEUED: {}\n", q.path.display()));
        for c in &q.copies {
            super::out(&format!("HANDOFF QUEUED: {}\n", c.display()));
        }
        if let Some(Ok(d)) = &finished {
            super::out(&printout::done_text(d, viewer));
        }
    }
    if let Some(w) = send::discard_draft(arg, cwd, &q.worktree) {
        eprintln!("{w}");
    }
    match finished {
        // Upstream's words when its done step fails after queueing.
        Some(Err(e)) => {
            eprintln!("CURRENT COMPLETION FAILED after handoff queued.");
            super::report(&e, false)
        }
        _ => exit::OK,
    }
}

/// The draft is refused: SwarmForge's report on stderr (and one JSON
/// document), exit 2.
fn invalid(shown: &str, errors: &[String], json: bool) -> i32 {
    eprint!("{}", draft::invalid_report(shown, errors));
    if json {
        // `status: invalid` stays (scripts use it); `message` and
        // `paths` make it an error document like every other.
        super::emit_json(serde_json::json!({
            "status": "invalid",
            "token": Token::HandoffInvalid.name(),
            "message": format!("{}: {}", Token::HandoffInvalid.name(), errors.join("; ")),
            "paths": [shown],
            "draft": shown,
            "errors": errors,
            "exit_code": exit::REFUSED,
        }));
    }
    exit::REFUSED
}

/// What `--help` says after the options: the environment, the exit codes
/// and every type a draft may have. (A refusal still prints SwarmForge's
/// own usage, byte for byte.)
fn after_help() -> String {
    let mut s = String::from(
        "The draft file is removed once queued.\n\n\
         Environment:\n  \
         SWARMFORGE_ROLE  the sending role (required); the project and the worktree\n                   \
         are found from the current directory\n\n\
         Exit codes: 0 queued; 1 environment or usage error; 2 draft refused (nothing queued).\n\n\
         Every draft starts with `type:`, `to: <role>[,<role>...]` (or `all`) and\n\
         `priority: NN` (00 is handed out first). Any type may add:\n  ",
    );
    s.push_str(&types::COMMON.join(", "));
    s.push_str(".\n\nDraft formats:\n");
    for t in types::TYPES.iter().filter(|t| t.sendable) {
        s.push_str(&format!(
            "\ntype: {}\nto: <role>[,<role>...]\npriority: NN\n",
            t.name
        ));
        for f in t.own_headers() {
            s.push_str(&format!("{f}: {}\n", field_hint(f)));
        }
        if t.body {
            s.push_str(&format!("\n<body, at most {} bytes>\n", t.max_body));
        }
    }
    s.push_str("\nSee docs/message-model.md for what each type means.");
    s
}

fn field_hint(field: Header) -> String {
    let line = |max: usize| format!("<one line, max {max} chars>");
    match field {
        Header::Task => "<short-stable-task-name>".into(),
        Header::Commit => "<10-char-commit-abbrev>".into(),
        Header::Message => line(types::MAX_LINE_CHARS),
        Header::Subject => line(types::MAX_SUBJECT_CHARS),
        Header::Question => format!(
            "{}; the body lists the options",
            line(types::MAX_QUESTION_CHARS)
        ),
        Header::AllowMultiple => "yes|no (default no)".into(),
        Header::AllowCustom => "yes|no (default yes)".into(),
        Header::Choices => "<option numbers, e.g. 1,3>".into(),
        Header::Reason => line(types::MAX_REASON_CHARS),
        _ => "<value>".into(),
    }
}
