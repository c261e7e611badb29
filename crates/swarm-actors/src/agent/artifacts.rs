//! Artifacts: files a message names with repeatable `artifact:` headers
//! (docs/message-model.md, "Artifacts").
//!
//! At send time a draft's `artifact: <path>` must, after normalisation and
//! resolving symlinks, be a regular file inside the sender's worktree; it is
//! stamped as `artifact: <sha256> <size> <path>`. `swarm artifacts` re-checks
//! containment and the hash at read time, because the file may have changed
//! (or been swapped for a symlink) since.

use crate::protocol::header::names;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::fsx;
use crate::protocol::clock;
use crate::protocol::fields;
use crate::protocol::trail::Original;
use crate::text::escape;

/// A checked artifact: what the stamped header says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stamped {
    pub sha256: String,
    pub size: u64,
    /// Normalised, relative to the sender's worktree.
    pub path: String,
}

impl Stamped {
    /// The header value `<sha256> <size> <path>`.
    pub fn header(&self) -> String {
        format!("{} {} {}", self.sha256, self.size, self.path)
    }
}

/// `a/./b/../c` → `a/c`; `None` when `..` climbs above the start.
fn normalise(rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

/// SHA-256 (lower-case hex) and size of an open file, read in chunks.
fn hash(mut f: File) -> io::Result<(String, u64)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    let digest = h.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok((hex, size))
}

/// Why a draft's `artifact: <path>` is refused, in the draft-error style
/// (the header, the path as written, escaped, and what to do instead).
#[derive(Debug, thiserror::Error)]
pub enum BadArtifact {
    #[error("Header 'artifact' must be a path relative to the worktree; got '{0}'.")]
    Absolute(String),
    #[error("Header 'artifact' path '{0}' leaves the worktree.")]
    Leaves(String),
    #[error("Header 'artifact' path '{0}' names the worktree itself, not a file.")]
    Worktree(String),
    #[error("Cannot resolve the worktree {}: {source}.", worktree.display())]
    NoWorktree {
        worktree: std::path::PathBuf,
        source: io::Error,
    },
    #[error("Header 'artifact' path '{0}' does not exist.")]
    Missing(String),
    #[error("Header 'artifact' path '{shown}' cannot be read: {source}.")]
    Unreadable { shown: String, source: io::Error },
    #[error("Header 'artifact' path '{0}' is a broken symlink.")]
    BrokenLink(String),
    #[error("Header 'artifact' path '{shown}' resolves to '{}' outside the worktree.", escape(&real.display().to_string()))]
    Outside {
        shown: String,
        real: std::path::PathBuf,
    },
    #[error("Header 'artifact' path '{0}' is not a regular file.")]
    NotAFile(String),
    #[error("Header 'artifact' path '{shown}' has {links} hard links; copy the file instead of linking it.")]
    HardLinks { shown: String, links: u64 },
}

/// Checks a draft's `artifact: <path>` against the sender's worktree and
/// stamps it, or returns the error in the draft-error style.
pub fn stamp(worktree: &Path, raw: &str) -> Result<Stamped, BadArtifact> {
    let shown = escape(raw);
    let unreadable = |source: io::Error| BadArtifact::Unreadable {
        shown: shown.clone(),
        source,
    };
    if raw.starts_with('/') {
        return Err(BadArtifact::Absolute(shown));
    }
    let Some(rel) = normalise(raw) else {
        return Err(BadArtifact::Leaves(shown));
    };
    if rel.is_empty() {
        return Err(BadArtifact::Worktree(shown));
    }
    let root = worktree
        .canonicalize()
        .map_err(|source| BadArtifact::NoWorktree {
            worktree: worktree.to_path_buf(),
            source,
        })?;
    let joined = root.join(&rel);
    match fs::symlink_metadata(&joined) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(BadArtifact::Missing(shown)),
        Err(e) => return Err(unreadable(e)),
    }
    let real = match joined.canonicalize() {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(BadArtifact::BrokenLink(shown))
        }
        Err(e) => return Err(unreadable(e)),
    };
    if !real.starts_with(&root) {
        return Err(BadArtifact::Outside { shown, real });
    }
    let meta = fs::metadata(&real).map_err(unreadable)?;
    if !meta.file_type().is_file() {
        return Err(BadArtifact::NotAFile(shown));
    }
    // A hard link is a second name of one file: the other name may be
    // outside the worktree (containment cannot be checked for it), and a
    // write there changes the artifact. Refused; a copy is unambiguous.
    if meta.nlink() > 1 {
        return Err(BadArtifact::HardLinks {
            shown,
            links: meta.nlink(),
        });
    }
    let (sha256, size) = fsx::open_regular(&real)
        .and_then(hash)
        .map_err(unreadable)?;
    Ok(Stamped {
        sha256,
        size,
        path: rel,
    })
}

/// What `swarm artifacts` finds for one artifact today.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Same size and hash as when it was sent.
    Ok,
    /// The content changed since it was sent.
    Changed,
    Missing,
    /// It now resolves outside the sender's worktree (a symlink swapped in).
    Outside,
    NotAFile,
    Unreadable,
    /// The header is not `<sha256> <size> <path>`.
    Malformed,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Changed => "changed",
            State::Missing => "missing",
            State::Outside => "outside",
            State::NotAFile => "not_a_file",
            State::Unreadable => "unreadable",
            State::Malformed => "malformed",
        }
    }
}

/// One listed artifact.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The message that names it.
    pub id: String,
    pub path: String,
    /// Size now (`None` when it cannot be read).
    pub size: Option<u64>,
    /// Size and hash when it was sent.
    pub sent_size: Option<u64>,
    pub sha256: Option<String>,
    pub mime: String,
    /// Modification time now (RFC 3339 UTC).
    pub modified: Option<String>,
    pub matches: bool,
    pub state: State,
}

/// A MIME type guessed from the file name's extension.
pub fn mime(path: &str) -> &'static str {
    let ext = path
        .rsplit('/')
        .next()
        .and_then(|n| n.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "json" => "application/json",
        "jsonl" | "ndjson" => "application/x-ndjson",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "xml" => "application/xml",
        "js" | "mjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "rs" => "text/x-rust",
        "py" => "text/x-python",
        "sh" => "application/x-sh",
        "c" | "h" => "text/x-c",
        "go" => "text/x-go",
        "java" => "text/x-java",
        "diff" | "patch" => "text/x-diff",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "webp" => "image/webp",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// The worktree an original was sent from:
/// `<wt>/.swarmforge/handoffs/{outbox,sent,failed}/<name>`.
pub fn sender_worktree(original: &Path) -> Option<PathBuf> {
    original.ancestors().nth(4).map(Path::to_path_buf)
}

/// Re-checks one stamped `artifact` value of message `id` sent from `worktree`.
pub fn check(id: &str, worktree: &Path, value: &str) -> Row {
    let mut row = Row {
        id: id.to_string(),
        path: value.to_string(),
        size: None,
        sent_size: None,
        sha256: None,
        mime: "application/octet-stream".into(),
        modified: None,
        matches: false,
        state: State::Malformed,
    };
    let Some((sha, size, path)) = fields::parse_artifact(value) else {
        return row;
    };
    row.path = path.to_string();
    row.sent_size = Some(size);
    row.sha256 = Some(sha.to_string());
    row.mime = mime(path).to_string();
    row.state = verify(worktree, path, sha, size, &mut row);
    row.matches = row.state == State::Ok;
    row
}

fn verify(worktree: &Path, path: &str, sha: &str, size: u64, row: &mut Row) -> State {
    let (Some(rel), Ok(root)) = (normalise(path), worktree.canonicalize()) else {
        return State::Outside;
    };
    if path.starts_with('/') || rel.is_empty() {
        return State::Outside;
    }
    let joined = root.join(&rel);
    if fs::symlink_metadata(&joined).is_err() {
        return State::Missing;
    }
    let Ok(real) = joined.canonicalize() else {
        return State::Missing;
    };
    if !real.starts_with(&root) {
        return State::Outside;
    }
    let Ok(meta) = fs::metadata(&real) else {
        return State::Unreadable;
    };
    row.modified = meta
        .modified()
        .ok()
        .map(|t| clock::iso(chrono::DateTime::<chrono::Utc>::from(t)));
    if !meta.file_type().is_file() {
        return State::NotAFile;
    }
    match fsx::open_regular(&real).and_then(hash) {
        Ok((h, n)) => {
            row.size = Some(n);
            if h == sha && n == size {
                State::Ok
            } else {
                State::Changed
            }
        }
        Err(_) => State::Unreadable,
    }
}

/// Every artifact of one original, re-checked.
pub fn rows(o: &Original) -> Vec<Row> {
    let Some(wt) = sender_worktree(&o.path) else {
        return Vec::new();
    };
    o.msg
        .get_all(names::ARTIFACT)
        .map(|v| check(o.id(), &wt, v))
        .collect()
}

/// The text table of `swarm artifacts` (`with_id`: a column for the message).
pub fn text(rows: &[Row], with_id: bool) -> String {
    let mut s = String::new();
    if rows.is_empty() {
        return s;
    }
    if with_id {
        s.push_str(&format!("{:<40} ", "ID"));
    }
    s.push_str(&format!(
        "{:<10} {:>10} {:<27} {:<24} {}\n",
        "STATE", "SIZE", "MODIFIED", "MIME", "PATH"
    ));
    for r in rows {
        if with_id {
            s.push_str(&format!("{:<40} ", escape(&r.id)));
        }
        let size = r
            .size
            .or(r.sent_size)
            .map_or("-".to_string(), |n| n.to_string());
        s.push_str(&format!(
            "{:<10} {:>10} {:<27} {:<24} {}\n",
            r.state.as_str(),
            size,
            r.modified.as_deref().unwrap_or("-"),
            r.mime,
            escape(&r.path)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_and_refuses_climbing() {
        assert_eq!(normalise("a/./b/../c").as_deref(), Some("a/c"));
        assert_eq!(normalise("a//b/").as_deref(), Some("a/b"));
        assert_eq!(normalise("../x"), None);
        assert_eq!(normalise("a/../../x"), None);
        assert_eq!(normalise(".").as_deref(), Some(""));
    }

    #[test]
    fn stamps_and_verifies() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("a.md"), "hello").unwrap();
        let s = stamp(d.path(), "./a.md").unwrap();
        assert_eq!(s.path, "a.md");
        assert_eq!(s.size, 5);
        assert_eq!(
            s.sha256,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        let r = check("x", d.path(), &s.header());
        assert_eq!(
            (r.state, r.matches, r.mime.as_str()),
            (State::Ok, true, "text/markdown")
        );
        fs::write(d.path().join("a.md"), "hellO").unwrap();
        assert_eq!(check("x", d.path(), &s.header()).state, State::Changed);
        fs::remove_file(d.path().join("a.md")).unwrap();
        assert_eq!(check("x", d.path(), &s.header()).state, State::Missing);
        assert_eq!(check("x", d.path(), "junk").state, State::Malformed);
    }
}
