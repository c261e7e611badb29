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
    /// Environment or usage problem; the text is printed verbatim (exit 1).
    #[error("{0}")]
    Env(String),
    /// A protocol refusal; the text is printed verbatim (exit 2). `token` is the
    /// leading stable token (for `--json`), `paths` the `- <path>` lines.
    #[error("{}", refusal_text(token, detail, paths))]
    Refused {
        token: String,
        detail: String,
        paths: Vec<PathBuf>,
        code: i32,
    },
}

fn hint_suffix(hint: &Option<&'static str>) -> String {
    hint.map(|h| format!("\n  hint: {h}")).unwrap_or_default()
}

/// A path as printed: control characters escaped, so a hostile file name
/// cannot drive the terminal or fake a token line.
fn shown(p: &Path) -> String {
    crate::protocol::header::escape(&p.to_string_lossy())
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

    /// A refusal with exit code 2.
    pub fn refused(token: &str, detail: impl fmt::Display, paths: Vec<PathBuf>) -> Self {
        Error::Refused {
            token: token.to_string(),
            detail: detail.to_string(),
            paths,
            code: exit::REFUSED,
        }
    }

    /// A bare token refusal with a chosen exit code (`NO_CURRENT_TASK` exits 1).
    pub fn token(token: &str, code: i32) -> Self {
        Error::Refused {
            token: token.to_string(),
            detail: String::new(),
            paths: Vec::new(),
            code,
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Io { .. } | Error::Env(_) => exit::ENV,
            Error::Refused { code, .. } => *code,
        }
    }

    /// The stable token for scripts (`--json`).
    pub fn token_name(&self) -> &str {
        match self {
            Error::Io { .. } => "IO_ERROR",
            Error::Env(_) => "ERROR",
            Error::Refused { token, .. } => token,
        }
    }

    /// JSON form for `--json` callers.
    pub fn to_json(&self) -> serde_json::Value {
        let paths: Vec<String> = match self {
            Error::Refused { paths, .. } => paths.iter().map(|p| p.display().to_string()).collect(),
            Error::Io { path, .. } => vec![path.display().to_string()],
            Error::Env(_) => Vec::new(),
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
