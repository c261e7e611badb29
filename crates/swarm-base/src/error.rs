//! The library's error type. Every variant knows its exit code, so binaries only
//! print `Display` and exit with `exit_code()`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Exit codes shared by every binary (SwarmForge's convention).
pub mod exit {
    /// Done, including `NO_TASK`.
    pub const OK: i32 = 0;
    /// Environment or usage error.
    pub const ENV: i32 = 1;
    /// Refusal: invalid draft, ambiguous queue state, malformed item.
    pub const REFUSED: i32 = 2;
    /// `swarm up --until-idle`: the swarm went idle with questions or mail
    /// waiting for a person (docs/launcher.md).
    pub const WAITING_FOR_PERSON: i32 = 3;
    /// `done-current`: cards of the current work have no outgoing handoff
    /// yet (`OPEN_CARDS`, today's SwarmForge's code for it).
    pub const OPEN_CARDS: i32 = 3;
}

/// Every refusal token the tools print (docs/protocol.md §7.5 and the
/// collaboration tokens), with its exit code: one table, so a token is never
/// spelled or numbered twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Token {
    AmbiguousTaskState,
    MalformedHandoff,
    NoCurrentTask,
    NoCurrentBatch,
    CurrentWorkIsBatch,
    CurrentWorkIsSingleTask,
    TaskInProcessIsBatch,
    TaskInProcessIsSingle,
    InvalidReceiveMode,
    HandoffInvalid,
    AnswerInvalid,
    NotAClarify,
    ClarifyClosed,
    NotYourClarify,
    ChangedSinceReview,
    PersonOnly,
    NotYourTurn,
    DiscussionClosed,
    UnknownDiscussion,
    UnknownId,
    AmbiguousId,
    NotWaitingForRole,
    ClarifyNeedsAnswer,
    Reserved,
    NotReserved,
    /// `swarm role`: a change of the lineup that is not allowed.
    LineupRefused,
    /// `swarm card new`: a card of that name is on the board already.
    CardExists,
    /// `done-current`: cards of the current work have no outgoing handoff.
    OpenCards,
    /// `done-current` / `ready-next`: the audit gate holds a git handoff
    /// of this role back (agent::guard).
    AuditPending,
    /// `ready-next`: a `git_handoff` of this role still waits in its outbox
    /// or for approval (agent::guard; today's SwarmForge's
    /// `ready_for_next_guard.bb`).
    WaitingForApproval,
}

impl Token {
    /// `(token, name as printed, exit code)`, in the spec's order.
    const TABLE: [(Token, &'static str, i32); 30] = [
        (
            Token::AmbiguousTaskState,
            "AMBIGUOUS_TASK_STATE",
            exit::REFUSED,
        ),
        (Token::MalformedHandoff, "MALFORMED_HANDOFF", exit::REFUSED),
        (Token::NoCurrentTask, "NO_CURRENT_TASK", exit::ENV),
        (Token::NoCurrentBatch, "NO_CURRENT_BATCH", exit::ENV),
        (
            Token::CurrentWorkIsBatch,
            "CURRENT_WORK_IS_BATCH",
            exit::REFUSED,
        ),
        (
            Token::CurrentWorkIsSingleTask,
            "CURRENT_WORK_IS_SINGLE_TASK",
            exit::REFUSED,
        ),
        (
            Token::TaskInProcessIsBatch,
            "TASK_IN_PROCESS_IS_BATCH",
            exit::REFUSED,
        ),
        (
            Token::TaskInProcessIsSingle,
            "TASK_IN_PROCESS_IS_SINGLE",
            exit::REFUSED,
        ),
        (
            Token::InvalidReceiveMode,
            "INVALID_RECEIVE_MODE",
            exit::REFUSED,
        ),
        (Token::HandoffInvalid, "HANDOFF INVALID", exit::REFUSED),
        (Token::AnswerInvalid, "ANSWER INVALID", exit::REFUSED),
        (Token::NotAClarify, "NOT_A_CLARIFY", exit::REFUSED),
        (Token::ClarifyClosed, "CLARIFY_CLOSED", exit::REFUSED),
        (Token::NotYourClarify, "NOT_YOUR_CLARIFY", exit::REFUSED),
        (
            Token::ChangedSinceReview,
            "CHANGED_SINCE_REVIEW",
            exit::REFUSED,
        ),
        (Token::PersonOnly, "PERSON_ONLY", exit::REFUSED),
        (Token::NotYourTurn, "NOT_YOUR_TURN", exit::REFUSED),
        (Token::DiscussionClosed, "DISCUSSION_CLOSED", exit::REFUSED),
        (
            Token::UnknownDiscussion,
            "UNKNOWN_DISCUSSION",
            exit::REFUSED,
        ),
        (Token::UnknownId, "UNKNOWN_ID", exit::REFUSED),
        (Token::AmbiguousId, "AMBIGUOUS_ID", exit::REFUSED),
        (
            Token::NotWaitingForRole,
            "NOT_WAITING_FOR_ROLE",
            exit::REFUSED,
        ),
        (
            Token::ClarifyNeedsAnswer,
            "CLARIFY_NEEDS_ANSWER",
            exit::REFUSED,
        ),
        (Token::Reserved, "RESERVED", exit::REFUSED),
        (Token::NotReserved, "NOT_RESERVED", exit::REFUSED),
        (Token::LineupRefused, "LINEUP_REFUSED", exit::REFUSED),
        (Token::CardExists, "CARD_EXISTS", exit::REFUSED),
        (Token::OpenCards, "OPEN_CARDS", exit::OPEN_CARDS),
        (Token::AuditPending, "AUDIT_PENDING", exit::REFUSED),
        (
            Token::WaitingForApproval,
            "WAITING_FOR_APPROVAL",
            exit::REFUSED,
        ),
    ];

    fn row(self) -> (Token, &'static str, i32) {
        Self::TABLE
            .into_iter()
            .find(|r| r.0 == self)
            .expect("every token has a row")
    }

    /// As printed (`AMBIGUOUS_TASK_STATE`).
    pub fn name(self) -> &'static str {
        self.row().1
    }

    pub fn exit_code(self) -> i32 {
        self.row().2
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O failure on a named file, with a repair hint when one helps.
    #[error("{}: {source}{}", shown(path), hint_suffix(hint))]
    Io {
        path: PathBuf,
        source: io::Error,
        hint: Option<&'static str>,
    },
    /// A file that is there but cannot be used as it stands (not UTF-8, not
    /// its format, a value out of range): the file, why, and how to repair
    /// it when a hint helps (exit 1).
    #[error("{}: {why}{}", shown(path), hint_line(hint))]
    BadFile {
        path: PathBuf,
        why: String,
        hint: Option<String>,
    },
    /// Something named that does not exist: a role, a session, a
    /// discussion, a draft file, an id, the project. The text names it and
    /// says where it was looked for (exit 1).
    #[error("{0}")]
    NotFound(String),
    /// An argument or a value given to a command that it cannot take (empty,
    /// control characters, too long, out of range, two options that
    /// exclude each other) (exit 1).
    #[error("{0}")]
    BadInput(String),
    /// The state does not allow it now: a session is open, a swarm runs, a
    /// folder is not empty, another process holds what it needs (exit 1).
    #[error("{0}")]
    Conflict(String),
    /// Another program or process failed the library: a child it runs
    /// (git, tmux, an agent CLI, `sh`) could not start, exited with an
    /// error or said something unusable, or a process it waits for
    /// (handoffd, a background `swarm up`, a collector, the bridge's server)
    /// did not answer in time. The text names the program and the cause
    /// (exit 1).
    #[error("{0}")]
    Process(String),
    /// The library itself failed: a broken invariant, or a runtime it
    /// needs (an async runtime, a thread, serializing its own data) that
    /// could not be had. Never the user's doing; the text says what failed
    /// (exit 1).
    #[error("{0}")]
    Internal(String),
    /// What the environment lacks (a variable, a tool, a network address)
    /// and any problem not named above; the text is printed verbatim (exit 1).
    #[error("{0}")]
    Env(String),
    /// A protocol refusal, printed `TOKEN: detail` then `- <path>` lines; the
    /// exit code is the token's.
    #[error("{}", refusal_text(token.name(), detail, paths))]
    Refused {
        token: Token,
        detail: String,
        paths: Vec<PathBuf>,
    },
    /// A draft (or an answer) that fails validation: nothing was written
    /// (exit 2). `subject` is the draft as shown, or the clarify's id.
    #[error("{}", invalid_text(token.name(), subject, errors))]
    Invalid {
        token: Token,
        subject: String,
        errors: Vec<String>,
    },
}

fn invalid_text(token: &str, subject: &str, errors: &[String]) -> String {
    let mut s = format!("{token}: {subject}\n\nErrors:");
    for e in errors {
        s.push_str(&format!("\n- {e}"));
    }
    s
}

fn hint_suffix(hint: &Option<&'static str>) -> String {
    hint.map(|h| format!("\n  hint: {h}")).unwrap_or_default()
}

fn hint_line(hint: &Option<String>) -> String {
    hint.as_ref()
        .map(|h| format!("\n  hint: {h}"))
        .unwrap_or_default()
}

/// A path as printed: control characters escaped, so a hostile file name
/// cannot drive the terminal or fake a token line.
fn shown(p: &Path) -> String {
    crate::text::escape(&p.to_string_lossy())
}

fn refusal_text(token: &str, detail: &str, paths: &[PathBuf]) -> String {
    let mut s = if detail.is_empty() {
        token.to_string()
    } else {
        format!("{token}: {detail}")
    };
    for p in paths {
        s.push_str(&format!("\n- {}", shown(p)));
    }
    s
}

impl Error {
    pub fn io(path: impl AsRef<Path>, source: io::Error) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            source,
            hint: None,
        }
    }

    pub fn io_hint(path: impl AsRef<Path>, source: io::Error, hint: &'static str) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            source,
            hint: Some(hint),
        }
    }

    pub fn env(msg: impl fmt::Display) -> Self {
        Error::Env(msg.to_string())
    }

    /// Another program or process failed (see [`Error::Process`]).
    pub fn process(msg: impl fmt::Display) -> Self {
        Error::Process(msg.to_string())
    }

    /// The library itself failed (see [`Error::Internal`]).
    pub fn internal(msg: impl fmt::Display) -> Self {
        Error::Internal(msg.to_string())
    }

    /// A file that cannot be used: `<path>: <why>`.
    pub fn bad_file(path: impl AsRef<Path>, why: impl fmt::Display) -> Self {
        Error::BadFile {
            path: path.as_ref().to_path_buf(),
            why: why.to_string(),
            hint: None,
        }
    }

    /// [`Error::bad_file`] with how to repair it (`\n  hint: <hint>`).
    pub fn bad_file_hint(
        path: impl AsRef<Path>,
        why: impl fmt::Display,
        hint: impl fmt::Display,
    ) -> Self {
        Error::BadFile {
            path: path.as_ref().to_path_buf(),
            why: why.to_string(),
            hint: Some(hint.to_string()),
        }
    }

    pub fn not_found(msg: impl fmt::Display) -> Self {
        Error::NotFound(msg.to_string())
    }

    pub fn bad_input(msg: impl fmt::Display) -> Self {
        Error::BadInput(msg.to_string())
    }

    pub fn conflict(msg: impl fmt::Display) -> Self {
        Error::Conflict(msg.to_string())
    }

    pub fn refused(token: Token, detail: impl fmt::Display, paths: Vec<PathBuf>) -> Self {
        Error::Refused {
            token,
            detail: detail.to_string(),
            paths,
        }
    }

    /// A bare token (`NO_CURRENT_TASK`).
    pub fn token(token: Token) -> Self {
        Error::refused(token, "", Vec::new())
    }

    /// An invalid draft (`HANDOFF INVALID`) or answer (`ANSWER INVALID`).
    pub fn invalid(token: Token, subject: impl Into<String>, errors: Vec<String>) -> Self {
        Error::Invalid {
            token,
            subject: subject.into(),
            errors,
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Io { .. }
            | Error::BadFile { .. }
            | Error::NotFound(_)
            | Error::BadInput(_)
            | Error::Conflict(_)
            | Error::Process(_)
            | Error::Internal(_)
            | Error::Env(_) => exit::ENV,
            Error::Refused { token, .. } | Error::Invalid { token, .. } => token.exit_code(),
        }
    }

    /// The stable token for scripts (`--json`).
    pub fn token_name(&self) -> &str {
        match self {
            Error::Io { .. } => "IO_ERROR",
            Error::BadFile { .. }
            | Error::NotFound(_)
            | Error::BadInput(_)
            | Error::Conflict(_)
            | Error::Process(_)
            | Error::Internal(_)
            | Error::Env(_) => "ERROR",
            Error::Refused { token, .. } | Error::Invalid { token, .. } => token.name(),
        }
    }

    /// JSON form for `--json` callers.
    pub fn to_json(&self) -> serde_json::Value {
        let paths: Vec<String> = match self {
            Error::Refused { paths, .. } => paths.iter().map(|p| p.display().to_string()).collect(),
            Error::Io { path, .. } | Error::BadFile { path, .. } => {
                vec![path.display().to_string()]
            }
            Error::NotFound(_)
            | Error::BadInput(_)
            | Error::Conflict(_)
            | Error::Process(_)
            | Error::Internal(_)
            | Error::Env(_)
            | Error::Invalid { .. } => Vec::new(),
        };
        serde_json::json!({
            "schema_version": JSON_SCHEMA_VERSION,
            "status": "error",
            "token": self.token_name(),
            "message": self.to_string(),
            "paths": paths,
            "exit_code": self.exit_code(),
        })
    }
}

/// The version of every JSON document the tools print (docs/json.md): each
/// object carries it as `schema_version`. Bump it only when a field changes
/// meaning or goes away; new fields come without a bump.
pub const JSON_SCHEMA_VERSION: u32 = 1;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attach a path to an `io::Result`.
pub trait IoContext<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}

/// Stamps `schema_version` into a JSON object (other values pass as they
/// are): the one JSON convention (docs/json.md), for the CLI and the cockpit.
pub fn stamped(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        o.insert("schema_version".into(), JSON_SCHEMA_VERSION.into());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_keep_the_env_exit_code_and_token() {
        let all = [
            Error::bad_file("/p/swarm.yaml", "not valid UTF-8"),
            Error::not_found("Unknown session: s1"),
            Error::bad_input("--limit must be at least 1"),
            Error::conflict("Session s1 is open"),
            Error::process("git status failed in /p: fatal"),
            Error::internal("cannot start the async runtime"),
            Error::env("anything else"),
        ];
        for e in &all {
            assert_eq!(e.exit_code(), exit::ENV, "{e}");
            assert_eq!(e.token_name(), "ERROR", "{e}");
        }
        assert_eq!(all[1].to_string(), "Unknown session: s1");
        assert_eq!(
            all[0].to_json()["paths"],
            serde_json::json!(["/p/swarm.yaml"])
        );
    }

    #[test]
    fn a_bad_file_names_the_file_the_cause_and_the_repair() {
        let e = Error::bad_file_hint("/p/a\u{1b}b", "not valid UTF-8", "save it as UTF-8");
        assert_eq!(
            e.to_string(),
            "/p/a\\eb: not valid UTF-8\n  hint: save it as UTF-8"
        );
        assert_eq!(Error::bad_file("/p/x", "why").to_string(), "/p/x: why");
    }
}
