//! Activity and usage of a tmux-mode agent from the transcript its CLI
//! keeps (docs/headless.md, "In tmux mode"): Claude Code's transcript,
//! Codex's rollout, Gemini CLI's chat recording, whose path each hands to
//! its turn-end hook, which leaves it in a turn-end request
//! (agents/turn_end.rs); the daemon, outside the sandbox, reads the part
//! written since the last turn end into the role's activity file and the
//! usage journal: the records a headless turn's stream gives. Claude's
//! lines are read by the stream's parser, the others by
//! agents/recording.rs.
//!
//! The transcript is untrusted like the stream. Only a regular `.jsonl`
//! file inside the CLI's own transcript folder is read (the path is
//! resolved first, so no symlink leads out, and opened without following
//! one). Each turn end reads at most [`MAX_CHUNK`] bytes from the offset
//! kept per role (`.swarmforge/telemetry/transcripts/<role>.json`, which
//! the agent cannot write), never the whole file; a partial last line waits
//! for the next turn end; a line longer than [`MAX_LINE`] or not a JSON
//! object is skipped and counted in a note, as is a line of a type not
//! known. Nothing here panics.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::stream::{self, Event, Figures};
use super::Cli;
use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::telemetry::activity::{self, Activity, Kind};
use crate::telemetry::usage::{self, Usage};

/// Set in the environment of a headless turn's CLI: its stream is read by
/// `swarm turn`, so the hook must not read its transcript a second time.
pub const HEADLESS_ENV: &str = "SWARMFORGE_HEADLESS_TURN";

/// The most read from a transcript at one turn end; the rest is read at
/// the next.
pub const MAX_CHUNK: u64 = 8 * 1024 * 1024;
/// The longest transcript line read (a tool result may hold a whole file).
pub const MAX_LINE: usize = 1024 * 1024;
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
struct Place {
    path: String,
    offset: u64,
    /// The keys of the last messages and calls taken (their usage, text…).
    #[serde(default)]
    counted: Vec<String>,
    /// Inside a line longer than a chunk: drop up to its end.
    #[serde(default)]
    skipping: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Cursor {
    files: Vec<Place>,
}

fn cursor_file(project: &Project, role: &str) -> PathBuf {
    project
        .telemetry_dir()
        .join("transcripts")
        .join(format!("{role}.json"))
}

/// The folder `cli` keeps its transcripts in, below its state folder as
/// this process's environment names it (the same path inside the
/// sandbox, launch/cli_state.rs): Claude Code's `projects`, Codex's
/// `sessions`, Gemini CLI's `tmp` (`<project>/chats/`).
fn transcripts_root(cli: Cli) -> Result<PathBuf> {
    let state = crate::launch::cli_state::folder(cli, &|k| std::env::var_os(k))
        .filter(|p| p.is_absolute())
        .ok_or_else(|| {
            Error::env(format!(
                "the environment names no folder of {}'s (HOME, CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME)",
                cli.name()
            ))
        })?;
    Ok(state.join(match cli {
        Cli::Claude => "projects",
        Cli::Codex => "sessions",
        Cli::Gemini => "tmp",
    }))
}

/// `path` resolved, if it is a `.jsonl` file inside `root` (resolved too).
fn inside(root: &Path, path: &Path) -> Result<PathBuf> {
    let refuse = |why: &str| {
        Err(Error::bad_file(
            path,
            format!("not read as a transcript: {why}"),
        ))
    };
    if !path.is_absolute() || path.extension().is_none_or(|x| x != "jsonl") {
        return refuse("not an absolute path to a .jsonl file");
    }
    let (Ok(root), Ok(real)) = (root.canonicalize(), path.canonicalize()) else {
        return refuse(&format!("cannot resolve it or {}", root.display()));
    };
    if !real.starts_with(&root) {
        return refuse(&format!("it lies outside {}", root.display()));
    }
    Ok(real)
}

/// What one turn end read.
#[derive(Debug, Default, PartialEq)]
pub struct Gained {
    /// Activity records written (turn start and end included).
    pub records: usize,
    /// Lines skipped (too long, not UTF-8, not JSON).
    pub skipped: usize,
    pub usage: Option<Usage>,
}

/// One turn end's reading.
struct Reader<'a> {
    role: &'a str,
    cli: Cli,
    /// Lines of a type this reader does not know, and the first few types.
    unknown: usize,
    unknown_types: Vec<String>,
    records: Vec<Activity>,
    first: Option<String>,
    session: Option<String>,
    model: Option<String>,
    figures: Figures,
    used: bool,
    skipped: usize,
}

/// A transcript's time stamp, if it is one.
fn time_of(v: &Value) -> Option<String> {
    let t = v["timestamp"].as_str().filter(|t| t.len() <= 64)?;
    clock::parse(t).map(clock::iso)
}

impl Reader<'_> {
    fn line(&mut self, bytes: &[u8], place: &mut Place) {
        let Some(v) = std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(s.trim_end()).ok())
            .filter(Value::is_object)
        else {
            self.skipped += 1;
            return;
        };
        if self.cli != Cli::Claude {
            return self.recorded(&v, place);
        }
        let ty = v["type"].as_str().unwrap_or("");
        // Summaries, file snapshots, system notes: not what the agent did.
        if ty != "assistant" && ty != "user" {
            return;
        }
        let time = time_of(&v);
        if self.first.is_none() {
            self.first = time.clone();
        }
        if let Some(id) = v["sessionId"].as_str() {
            self.session = Some(activity::bound(id));
        }
        let m = &v["message"];
        if ty == "assistant" {
            if let Some(model) = m["model"].as_str().filter(|m| !m.starts_with('<')) {
                self.model = Some(activity::bound(model));
            }
            self.count_usage(m, place);
        }
        for ev in stream::parse(Cli::Claude, &v) {
            if let Event::Activity {
                kind,
                name,
                text,
                status,
            } = ev
            {
                let mut a = stream::record(self.role, kind, name, text, status);
                if let Some(t) = &time {
                    a.time = t.clone();
                }
                self.records.push(a);
            }
        }
    }

    /// A line of Codex's rollout or Gemini CLI's recording.
    fn recorded(&mut self, v: &Value, place: &mut Place) {
        let time = time_of(v);
        for (key, ev) in super::recording::parse(self.cli, v) {
            if let Some(k) = key {
                let k = activity::bound(&k);
                if place.counted.contains(&k) {
                    continue;
                }
                place.counted.push(k);
                if place.counted.len() > KEEP_IDS {
                    place.counted.remove(0);
                }
            }
            match ev {
                Event::Session(id) => self.session = Some(activity::bound(&id)),
                Event::Model(m) => self.model = Some(activity::bound(&m)),
                Event::Activity {
                    kind,
                    name,
                    text,
                    status,
                } => {
                    if self.first.is_none() {
                        self.first = time.clone();
                    }
                    let mut a = stream::record(self.role, kind, name, text, status);
                    if let Some(t) = &time {
                        a.time = t.clone();
                    }
                    self.records.push(a);
                }
                Event::Usage(f) => {
                    if self.first.is_none() {
                        self.first = time.clone();
                    }
                    let t = &mut self.figures;
                    t.input_tokens = t.input_tokens.saturating_add(f.input_tokens);
                    t.output_tokens = t.output_tokens.saturating_add(f.output_tokens);
                    t.cache_read_tokens = t.cache_read_tokens.saturating_add(f.cache_read_tokens);
                    t.cache_write_tokens =
                        t.cache_write_tokens.saturating_add(f.cache_write_tokens);
                    self.used = true;
                }
                Event::Unknown(t) => {
                    self.unknown += 1;
                    if self.unknown_types.len() < 8 && !self.unknown_types.contains(&t) {
                        self.unknown_types.push(activity::bound(&t));
                    }
                }
            }
        }
    }

    /// Adds a message's usage once per message id.
    fn count_usage(&mut self, m: &Value, place: &mut Place) {
        let u = &m["usage"];
        if !u.is_object() {
            return;
        }
        if let Some(id) = m["id"].as_str() {
            let id = activity::bound(id);
            if place.counted.contains(&id) {
                return;
            }
            place.counted.push(id);
            if place.counted.len() > KEEP_IDS {
                place.counted.remove(0);
            }
        }
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        let f = &mut self.figures;
        f.input_tokens = f.input_tokens.saturating_add(n("input_tokens"));
        f.output_tokens = f.output_tokens.saturating_add(n("output_tokens"));
        f.cache_read_tokens = f
            .cache_read_tokens
            .saturating_add(n("cache_read_input_tokens"));
        f.cache_write_tokens = f
            .cache_write_tokens
            .saturating_add(n("cache_creation_input_tokens"));
        self.used = true;
    }
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

/// The handoff this turn worked on: the one in process at its end, else
/// the last one finished since it started.
fn item_of(project: &Project, wt: &Worktree, since: Option<&str>) -> Option<(String, String)> {
    use crate::protocol::trail::{handoff_names, load_message, Loaded};
    use std::os::unix::fs::MetadataExt;
    let max = crate::protocol::config::Config::load(&project.config_file())
        .map(|c| c.limits.max_file_bytes)
        .ok()?;
    if let Some(it) = crate::launch::turn_item::current_item(wt, max) {
        return Some(it);
    }
    let since: SystemTime = since.and_then(clock::parse)?.into();
    let dir = wt.completed();
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for name in handoff_names(&dir).ok()? {
        let p = dir.join(name);
        // A finished item was renamed into completed/: its change time.
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let changed = SystemTime::UNIX_EPOCH
            + Duration::new(meta.ctime().max(0) as u64, meta.ctime_nsec() as u32);
        if changed >= since && best.as_ref().is_none_or(|(t, _)| changed > *t) {
            best = Some((changed, p));
        }
    }
    let (_, p) = best?;
    let Loaded::Ok(m) = load_message(&p, max) else {
        return None;
    };
    let id = m.get(crate::protocol::header::names::ID)?.to_string();
    let thread = m.thread().unwrap_or(&id).to_string();
    Some((id, thread))
}

/// Whether the part of `transcript` after the offset kept for `role`
/// holds `last` (the text the turn ended with, as JSON writes it) on a
/// finished line: Claude Code may run its Stop hook before it wrote the
/// turn's last message (seen with 2.1.332 under load), and the turn is
/// read whole only once it is there. A transcript that cannot be read
/// counts as flushed (reading it says why).
pub fn flushed(project: &Project, role: &str, cli: Cli, transcript: &Path, last: &str) -> bool {
    let Some(real) = transcripts_root(cli)
        .ok()
        .and_then(|root| inside(&root, transcript).ok())
    else {
        return true;
    };
    let head: String = last.chars().take(200).collect();
    let Ok(quoted) = serde_json::to_string(&head) else {
        return true;
    };
    let needle = quoted.trim_matches('"').as_bytes().to_vec();
    let offset = fsx::read_bounded(&cursor_file(project, role), MAX_CURSOR)
        .ok()
        .and_then(|b| serde_json::from_slice::<Cursor>(&b).ok())
        .and_then(|c| {
            let key = real.display().to_string();
            c.files
                .into_iter()
                .find(|p| p.path == key)
                .map(|p| p.offset)
        })
        .unwrap_or(0);
    let mut buf = Vec::new();
    let read = fsx::open_regular(&real).and_then(|mut f| {
        f.seek(SeekFrom::Start(offset))?;
        f.take(MAX_CHUNK).read_to_end(&mut buf)
    });
    read.is_err()
        || buf.len() as u64 >= MAX_CHUNK
        || buf
            .windows(needle.len().max(1))
            .rposition(|w| w == needle.as_slice())
            .is_some_and(|i| buf[i..].contains(&b'\n'))
}

/// At a turn end of `cli` in tmux mode: reads what `transcript` gained
/// since the last turn end into `role`'s activity and usage.
pub fn turn_end(project: &Project, role: &str, cli: Cli, transcript: &Path) -> Result<Gained> {
    let roles = Roles::load(&project.roles_tsv())?;
    let Some(r) = roles.roles.iter().find(|r| r.name == role) else {
        return Err(Error::not_found(format!(
            "role {} is not in {}",
            crate::text::escape(role),
            project.roles_tsv().display()
        )));
    };
    let root = transcripts_root(cli)?;
    let reader = gather(project, role, cli, &root, transcript)?;
    write(project, r, reader)
}

/// Reads what `transcript` (inside `root`) gained since the offset kept
/// for `role`, and keeps the new offset.
fn gather<'a>(
    project: &Project,
    role: &'a str,
    cli: Cli,
    root: &Path,
    transcript: &Path,
) -> Result<Reader<'a>> {
    let real = inside(root, transcript)?;
    let key = real.display().to_string();
    let file = cursor_file(project, role);
    let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    fsx::ensure_dirs(&[&dir]).map_err(|e| Error::io(&dir, e))?;
    let lock = dir.join(format!(".{role}.lock"));
    let _held = fsx::lock(&lock).map_err(|e| Error::io(&lock, e))?;
    let mut cursor: Cursor = fsx::read_bounded(&file, MAX_CURSOR)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut place = cursor
        .files
        .iter()
        .position(|p| p.path == key)
        .map(|i| cursor.files.remove(i))
        .unwrap_or(Place {
            path: key,
            ..Place::default()
        });
    let mut f = fsx::open_regular(&real).map_err(|e| Error::io(&real, e))?;
    let len = f.metadata().map_err(|e| Error::io(&real, e))?.len();
    if place.offset > len {
        // Replaced by a shorter file: a new transcript under the old name.
        place = Place {
            path: place.path,
            ..Place::default()
        };
    }
    let mut buf = Vec::new();
    f.seek(SeekFrom::Start(place.offset))
        .and_then(|_| f.take(MAX_CHUNK).read_to_end(&mut buf))
        .map_err(|e| Error::io(&real, e))?;
    let mut reader = Reader {
        role,
        cli,
        unknown: 0,
        unknown_types: Vec::new(),
        records: Vec::new(),
        first: None,
        session: None,
        model: None,
        figures: Figures::default(),
        used: false,
        skipped: 0,
    };
    read_chunk(&buf, buf.len() as u64 == MAX_CHUNK, &mut place, &mut reader);
    cursor.files.push(place);
    if cursor.files.len() > KEEP {
        cursor.files.remove(0);
    }
    let bytes = serde_json::to_vec(&cursor).map_err(|e| Error::internal(format!("cursor: {e}")))?;
    fsx::replace(&dir, &file, &bytes).map_err(|e| Error::io(&file, e))?;
    Ok(reader)
}

/// The turn's records, framed by its start and end, and its usage.
fn write(project: &Project, r: &crate::protocol::roles::Role, rd: Reader) -> Result<Gained> {
    let role = r.name.as_str();
    if rd.records.is_empty() && !rd.used && rd.skipped + rd.unknown == 0 {
        return Ok(Gained::default());
    }
    let cli = rd.cli;
    let item = item_of(
        project,
        &Worktree::new(&r.worktree_path),
        rd.first.as_deref(),
    );
    let id = item.as_ref().map(|(id, _)| id.clone());
    let mut out = Vec::new();
    let mut start = Activity::now(role, Kind::TurnStart).text(&match &rd.session {
        Some(s) => format!("{} (tmux) turn in session {s}", cli.name()),
        None => format!("{} (tmux) turn", cli.name()),
    });
    start.name = Some(cli.name().to_string());
    if let Some(t) = &rd.first {
        start.time = t.clone();
    }
    out.push(start);
    out.extend(rd.records);
    if rd.skipped + rd.unknown > 0 {
        let types = if rd.unknown_types.is_empty() {
            String::new()
        } else {
            format!(" ({})", rd.unknown_types.join(", "))
        };
        out.push(Activity::now(role, Kind::Note).text(&format!(
            "skipped {} unreadable transcript line(s) and {} of unknown type{types}",
            rd.skipped, rd.unknown
        )));
    }
    let mut recorded = None;
    if rd.used {
        let mut u = stream::usage_of(role, cli, rd.figures, rd.model.clone(), item.as_ref());
        u.started = rd.first.clone();
        if u.total_tokens() > 0 {
            usage::record(project, &u)?;
            out.push(usage::activity(&u));
            recorded = Some(u);
        }
    }
    let mut end = Activity::now(role, Kind::TurnEnd);
    end.status = Some("ok".into());
    out.push(end);
    let n = out.len();
    for mut a in out {
        a.id = id.clone();
        activity::append(project, &a)?;
    }
    Ok(Gained {
        records: n,
        skipped: rd.skipped,
        usage: recorded,
    })
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
