//! Where the reading of each transcript stopped, kept per role in
//! `.swarmforge/telemetry/transcripts/<role>.json` (the person's state:
//! the agent cannot write it), and the reading on from there.
//!
//! Invariant kept here: **each line is read once, whole**: a turn end
//! reads at most [`MAX_CHUNK`] bytes from the kept offset, under the
//! role's lock, and the offset moves only past whole lines (a partial last
//! line waits for the next turn end; a line longer than a chunk is dropped
//! to its end); a transcript shorter than its offset is a new one, read
//! from its start. What was taken once by key (a message's usage, a call)
//! is remembered ([`Place::first_time`]), so a line written again does
//! not count twice.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::reader::Reader;
use super::{inside, Cli, MAX_CHUNK, MAX_LINE};
use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::layout::Project;

/// Transcripts remembered per role (a resumed older conversation is read
/// on from where it was left, not again from its start).
const KEEP: usize = 8;
/// Keys of what was taken once, remembered per transcript: a Claude
/// message's content blocks are separate lines carrying the same usage, and
/// Gemini CLI writes a message again each time it changes (agents/recording.rs).
const KEEP_IDS: usize = 64;
/// The largest cursor file read.
const MAX_CURSOR: u64 = 256 * 1024;

/// Where the reading of one transcript stopped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Place {
    path: String,
    pub(super) offset: u64,
    /// The keys of the last messages and calls taken (their usage, text…).
    #[serde(default)]
    counted: Vec<String>,
    /// Inside a line longer than a chunk: drop up to its end.
    #[serde(default)]
    skipping: bool,
}

impl Place {
    /// Whether `key` is taken for the first time; it is remembered (the
    /// last [`KEEP_IDS`] of them).
    pub(super) fn first_time(&mut self, key: String) -> bool {
        if self.counted.contains(&key) {
            return false;
        }
        self.counted.push(key);
        if self.counted.len() > KEEP_IDS {
            self.counted.remove(0);
        }
        true
    }
}

/// A role's places, the latest last.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Cursor {
    files: Vec<Place>,
}

impl Cursor {
    /// The role's cursor file as kept; none (or unreadable): empty.
    fn load(file: &Path) -> Cursor {
        fsx::read_bounded(file, MAX_CURSOR)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// The place of the transcript `key`, taken out (a new one: from its
    /// start).
    fn take(&mut self, key: String) -> Place {
        self.files
            .iter()
            .position(|p| p.path == key)
            .map(|i| self.files.remove(i))
            .unwrap_or(Place {
                path: key,
                ..Place::default()
            })
    }

    /// `place` kept as the latest, the oldest beyond [`KEEP`] forgotten;
    /// written whole into `file`.
    fn save(mut self, place: Place, dir: &Path, file: &Path) -> Result<()> {
        self.files.push(place);
        if self.files.len() > KEEP {
            self.files.remove(0);
        }
        let bytes =
            serde_json::to_vec(&self).map_err(|e| Error::internal(format!("cursor: {e}")))?;
        fsx::replace(dir, file, &bytes).map_err(|e| Error::io(file, e))
    }
}

fn cursor_file(project: &Project, role: &str) -> PathBuf {
    project
        .telemetry_dir()
        .join("transcripts")
        .join(format!("{role}.json"))
}

/// The offset kept for `role` in the transcript at `real` (resolved); 0
/// when none is.
pub(super) fn kept_offset(project: &Project, role: &str, real: &Path) -> u64 {
    let key = real.display().to_string();
    Cursor::load(&cursor_file(project, role))
        .files
        .into_iter()
        .find(|p| p.path == key)
        .map(|p| p.offset)
        .unwrap_or(0)
}

/// Reads what `transcript` (inside `root`) gained since the offset kept
/// for `role`, and keeps the new offset.
pub(super) fn gather<'a>(
    project: &Project,
    role: &'a str,
    cli: Cli,
    root: &Path,
    transcript: &Path,
) -> Result<Reader<'a>> {
    let real = inside(root, transcript)?;
    let file = cursor_file(project, role);
    let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    fsx::ensure_dirs(&[&dir]).map_err(|e| Error::io(&dir, e))?;
    let lock = dir.join(format!(".{role}.lock"));
    let _held = fsx::lock(&lock).map_err(|e| Error::io(&lock, e))?;
    let mut cursor = Cursor::load(&file);
    let mut place = cursor.take(real.display().to_string());
    let buf = read_on(&real, &mut place)?;
    let mut reader = Reader::new(role, cli);
    read_chunk(&buf, buf.len() as u64 == MAX_CHUNK, &mut place, &mut reader);
    cursor.save(place, &dir, &file)?;
    Ok(reader)
}

/// At most [`MAX_CHUNK`] bytes of `real` from `place`'s offset (from the
/// start when the file is now shorter: a new transcript under the old
/// name).
fn read_on(real: &Path, place: &mut Place) -> Result<Vec<u8>> {
    let mut f = fsx::open_regular(real).map_err(|e| Error::io(real, e))?;
    let len = f.metadata().map_err(|e| Error::io(real, e))?.len();
    if place.offset > len {
        *place = Place {
            path: std::mem::take(&mut place.path),
            ..Place::default()
        };
    }
    let mut buf = Vec::new();
    f.seek(SeekFrom::Start(place.offset))
        .and_then(|_| f.take(MAX_CHUNK).read_to_end(&mut buf))
        .map_err(|e| Error::io(real, e))?;
    Ok(buf)
}

/// Splits `buf` (read from `place.offset`) into whole lines for `reader`
/// and moves the offset past them.
fn read_chunk(buf: &[u8], full: bool, place: &mut Place, reader: &mut Reader) {
    let mut at = 0;
    if place.skipping {
        match buf.iter().position(|c| *c == b'\n') {
            Some(i) => {
                at = i + 1;
                place.skipping = false;
            }
            None => {
                place.offset += buf.len() as u64;
                return;
            }
        }
    }
    while let Some(i) = buf[at..].iter().position(|c| *c == b'\n') {
        let line = &buf[at..at + i + 1];
        if line.len() > MAX_LINE {
            reader.skipped += 1;
        } else {
            reader.line(line, place);
        }
        at += i + 1;
    }
    if at == 0 && full {
        // One line longer than a whole chunk: skipped to its end.
        reader.skipped += 1;
        place.skipping = true;
        at = buf.len();
    }
    place.offset += at as u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assistant(id: &str, block: &str, input: u64) -> String {
        format!(
            "{{\"type\":\"assistant\",\"sessionId\":\"s1\",\"timestamp\":\"2026-12-02T03:00:00.000Z\",\"message\":{{\"id\":\"{id}\",\"model\":\"m\",\"content\":[{block}],\"usage\":{{\"input_tokens\":{input},\"output_tokens\":2,\"cache_read_input_tokens\":3,\"cache_creation_input_tokens\":4}}}}}}\n"
        )
    }

    #[test]
    fn only_new_whole_lines_are_read_and_each_message_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path().join("p"));
        let root = dir.path().join("projects");
        std::fs::create_dir_all(root.join("x")).unwrap();
        let t = root.join("x/s1.jsonl");
        let text = r#"{"type":"text","text":"hi"}"#;
        let call = r#"{"type":"tool_use","name":"Bash","input":{"command":"ls"}}"#;
        let mut body = String::from("{\"type\":\"summary\"}\nnot json\n");
        body += &assistant("m1", text, 10);
        body += &assistant("m1", call, 10);
        body += &"z".repeat(MAX_LINE + 10);
        body += "\n";
        std::fs::write(&t, &body).unwrap();
        let r = gather(&p, "r", Cli::Claude, &root, &t).unwrap();
        assert_eq!(r.skipped, 2);
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.records[1].name.as_deref(), Some("Bash"));
        assert_eq!(r.records[0].time, "2026-12-02T03:00:00.000000Z");
        assert_eq!(r.figures.input_tokens, 10, "one message, counted once");
        assert_eq!(r.session.as_deref(), Some("s1"));
        // Nothing new: nothing read. A half-written line waits.
        let r = gather(&p, "r", Cli::Claude, &root, &t).unwrap();
        assert!(r.records.is_empty() && !r.used && r.skipped == 0);
        let more = assistant("m2", text, 5);
        let (a, b) = more.split_at(30);
        let mut f = std::fs::OpenOptions::new().append(true).open(&t).unwrap();
        use std::io::Write;
        f.write_all(a.as_bytes()).unwrap();
        assert!(gather(&p, "r", Cli::Claude, &root, &t)
            .unwrap()
            .records
            .is_empty());
        f.write_all(b.as_bytes()).unwrap();
        // The same message again (its next block) is not counted twice.
        f.write_all(assistant("m2", call, 5).as_bytes()).unwrap();
        let r = gather(&p, "r", Cli::Claude, &root, &t).unwrap();
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.figures.input_tokens, 5);
    }

    #[test]
    fn a_path_outside_the_projects_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::new(dir.path().join("p"));
        let root = dir.path().join("projects");
        std::fs::create_dir_all(&root).unwrap();
        let outside = dir.path().join("secret.jsonl");
        std::fs::write(&outside, assistant("m", r#"{"type":"text","text":"x"}"#, 1)).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link.jsonl")).unwrap();
        for t in [
            outside.clone(),
            root.join("link.jsonl"),
            root.join("../secret.jsonl"),
        ] {
            let e = gather(&p, "r", Cli::Claude, &root, &t)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("outside"), "{e}");
        }
        let e = gather(&p, "r", Cli::Claude, &root, Path::new("rel.jsonl"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("absolute"), "{e}");
        std::fs::write(root.join("a.txt"), "x").unwrap();
        assert!(gather(&p, "r", Cli::Claude, &root, &root.join("a.txt")).is_err());
    }
}
