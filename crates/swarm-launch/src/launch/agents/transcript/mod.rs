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
//!
//! Here: which transcripts may be read, whether the turn's last message is
//! written yet, and the turn's records. Where each transcript's reading
//! stopped is cursor.rs; what its lines say, reader.rs.

mod cursor;
mod reader;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::stream;
use super::Cli;
use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::telemetry::activity::{self, Activity, Kind};
use crate::telemetry::usage::{self, Usage};
use reader::Reader;

/// Set in the environment of a headless turn's CLI: its stream is read by
/// `swarm turn`, so the hook must not read its transcript a second time.
pub const HEADLESS_ENV: &str = "SWARMFORGE_HEADLESS_TURN";

/// The most read from a transcript at one turn end; the rest is read at
/// the next.
pub const MAX_CHUNK: u64 = 8 * 1024 * 1024;
/// The longest transcript line read (a tool result may hold a whole file).
pub const MAX_LINE: usize = 1024 * 1024;

/// The folder `cli` keeps its transcripts in, below its state folder as
/// this process's environment names it (the same path inside the
/// sandbox, launch/cli_state/): Claude Code's `projects`, Codex's
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
    let offset = cursor::kept_offset(project, role, &real);
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
    let reader = cursor::gather(project, role, cli, &root, transcript)?;
    write(project, r, reader)
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
