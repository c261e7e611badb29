//! Each CLI's own folder-trust store, read and edited: Claude Code's and
//! Gemini CLI's JSON, Codex's TOML.
//!
//! Invariant: a store is changed by an atomic replace that keeps its mode
//! and every other key (Codex's comments and layout too); a store that does
//! not parse is refused, never overwritten; a store is read within
//! [`MAX_STORE`].

use std::path::Path;

use serde_json::{json, Value};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::launch::agents::Cli;

/// Largest store read (a long-used `~/.claude.json` is a few MB).
const MAX_STORE: u64 = 64 * 1024 * 1024;

pub(super) fn key(cli: Cli, folder: &Path) -> String {
    let f = folder.to_string_lossy();
    match cli {
        Cli::Claude => format!("projects[{}].hasTrustDialogAccepted", json!(f)),
        Cli::Codex => format!("[projects.{}] trust_level", json!(f)),
        Cli::Gemini => json!(f).to_string(),
    }
}

/// A store's text: None when the file does not exist.
pub(super) fn read(file: &Path) -> Result<Option<String>> {
    match std::fs::symlink_metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(file, e)),
        Ok(_) => {}
    }
    let b = fsx::read_bounded(file, MAX_STORE)
        .map_err(|e| Error::bad_file(file, format!("cannot read it: {e}")))?;
    String::from_utf8(b)
        .map(Some)
        .map_err(|_| Error::bad_file(file, "not UTF-8 text; not changed"))
}

pub(super) fn bad(file: &Path, cause: impl std::fmt::Display) -> Error {
    Error::bad_file_hint(
        file,
        format!("does not parse ({cause}); nothing in it was changed"),
        "repair or move the file, then run the command again",
    )
}

/// Replaces `file` atomically, keeping its mode (a new one is private),
/// through a symlink to its target.
pub(super) fn write(file: &Path, text: &str) -> Result<()> {
    let real = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    let dir = real.parent().unwrap_or(Path::new("/")).to_path_buf();
    if real.exists() {
        fsx::replace(&dir, &real, text.as_bytes()).at(&real)
    } else {
        fsx::ensure_dirs(&[&dir]).at(&dir)?;
        fsx::write_private(&dir, &real, text.as_bytes()).at(&real)
    }
}

/// The trust as the store holds it now.
pub(super) fn is_trusted(cli: Cli, text: Option<&str>, file: &Path, folder: &Path) -> Result<bool> {
    let Some(text) = text else { return Ok(false) };
    let f = folder.to_string_lossy();
    Ok(match cli {
        Cli::Claude | Cli::Gemini => {
            let v: Value = serde_json::from_str(text).map_err(|e| bad(file, e))?;
            match cli {
                Cli::Claude => v["projects"][f.as_ref()]["hasTrustDialogAccepted"] == true,
                _ => v[f.as_ref()] == "TRUST_FOLDER",
            }
        }
        Cli::Codex => {
            let d: toml_edit::DocumentMut = text.parse().map_err(|e| bad(file, e))?;
            d.get("projects")
                .and_then(|p| p.get(f.as_ref()))
                .and_then(|t| t.get("trust_level"))
                .and_then(|v| v.as_str())
                == Some("trusted")
        }
    })
}

/// The store's text with the trust set (`on`) or removed.
pub(super) fn edit(
    cli: Cli,
    text: Option<&str>,
    file: &Path,
    folder: &Path,
    on: bool,
) -> Result<String> {
    let f = folder.to_string_lossy().into_owned();
    match cli {
        Cli::Claude | Cli::Gemini => edit_json(cli, text, file, f, on),
        Cli::Codex => edit_codex(text, file, f, on),
    }
}

/// Claude Code's `projects["<folder>"].hasTrustDialogAccepted`, Gemini
/// CLI's `"<folder>": "TRUST_FOLDER"`; every other key kept.
fn edit_json(cli: Cli, text: Option<&str>, file: &Path, f: String, on: bool) -> Result<String> {
    let mut v: Value = match text {
        Some(t) => serde_json::from_str(t).map_err(|e| bad(file, e))?,
        None => json!({}),
    };
    if !v.is_object() {
        return Err(bad(file, "not a JSON object"));
    }
    if cli == Cli::Gemini {
        let m = v.as_object_mut().expect("an object");
        if on {
            m.insert(f, json!("TRUST_FOLDER"));
        } else {
            m.remove(&f);
        }
    } else {
        let projects = v
            .as_object_mut()
            .expect("an object")
            .entry("projects")
            .or_insert_with(|| json!({}));
        let Some(projects) = projects.as_object_mut() else {
            return Err(bad(file, "`projects` is not an object"));
        };
        let entry = projects.entry(f.clone()).or_insert_with(|| json!({}));
        let Some(entry) = entry.as_object_mut() else {
            return Err(bad(file, "a `projects` entry is not an object"));
        };
        if on {
            entry.insert("hasTrustDialogAccepted".into(), json!(true));
        } else {
            entry.remove("hasTrustDialogAccepted");
            // An entry holding nothing else was ours alone.
            if entry.is_empty() {
                projects.remove(&f);
            }
        }
    }
    let mut out = serde_json::to_string_pretty(&v).map_err(|e| bad(file, e))?;
    out.push('\n');
    Ok(out)
}

/// Codex's `[projects."<folder>"] trust_level = "trusted"`; its comments,
/// layout and other tables kept.
fn edit_codex(text: Option<&str>, file: &Path, f: String, on: bool) -> Result<String> {
    let mut d: toml_edit::DocumentMut = text.unwrap_or("").parse().map_err(|e| bad(file, e))?;
    if !d.contains_key("projects") {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        d.insert("projects", toml_edit::Item::Table(t));
    }
    let Some(projects) = d["projects"].as_table_like_mut() else {
        return Err(bad(file, "`projects` is not a table"));
    };
    if on {
        if projects.get(&f).is_none() {
            projects.insert(&f, toml_edit::Item::Table(toml_edit::Table::new()));
        }
        let Some(t) = projects.get_mut(&f).and_then(|t| t.as_table_like_mut()) else {
            return Err(bad(file, "a `projects` entry is not a table"));
        };
        t.insert("trust_level", toml_edit::value("trusted"));
    } else {
        let now_empty = match projects.get_mut(&f).and_then(|t| t.as_table_like_mut()) {
            Some(t) => {
                t.remove("trust_level");
                t.is_empty()
            }
            None => false,
        };
        if now_empty {
            projects.remove(&f);
        }
        if projects.is_empty() {
            d.remove("projects");
        }
    }
    Ok(d.to_string())
}
