//! `swarm ingest`: an agent that only writes a log (BettaFish ForumEngine's
//! speakers) takes part anyway. The log file is followed; each complete line
//! that matches `--match` is posted as a `post` from the role, its capture as
//! the body.
//!
//! Exactly once across kill -9: the cursor file (file identity, a hash of
//! the file's first bytes, the offset of the next unread line) is replaced
//! atomically after every post. Before a post the cursor records the line
//! as pending, with the highest sequence number the role had used; after a
//! restart, a pending line counts as posted when the role's outbox, sent/ or
//! failed/ holds a post of it numbered above that (posts are published
//! complete-or-absent), else it is posted again. A partial last line waits
//! for its newline. A file replaced (another inode) or truncated (shorter
//! than the cursor, or other first bytes, or other bytes just before the
//! cursor: a log rewritten in place behind the same banner) starts over at
//! 0 and, with
//! `--sessions`, opens a new forum session, as ForumEngine does on a new log.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;
use sha2::{Digest, Sha256};

use crate::agent::send::{self, Sender};
use crate::error::{Error, IoContext, Result};
use crate::forum::session;
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::draft;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::store;
use crate::sys::watch::DirWatch;

/// Longest line looked at; a longer one is skipped whole (logged).
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// Bytes hashed from the start of the file to notice a rewrite in place.
const HEAD_BYTES: u64 = 256;
/// Re-check interval when no file event comes (events are hints).
const RECHECK: Duration = Duration::from_millis(500);

/// What to follow and how to post.
pub struct Options {
    pub role: String,
    pub file: PathBuf,
    pub pattern: Regex,
    pub to: String,
    pub priority: String,
    /// A new log (replaced or truncated file) opens a new forum session.
    pub sessions: bool,
    /// Read what is there and return instead of following.
    pub once: bool,
}

/// The persisted position in one followed file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Cursor {
    dev: u64,
    ino: u64,
    /// sha256 of the first min(offset, 256) bytes.
    head: String,
    /// sha256 of the min(offset, 256) bytes before `offset` (None in a
    /// cursor written before it was kept: not checked).
    tail: Option<String>,
    offset: u64,
    /// A line being posted: its end offset and the role's highest sequence
    /// number before the post.
    pending: Option<(u64, u64)>,
    /// A new log whose session is not yet opened: when it was noticed.
    session_due: Option<String>,
}

impl Cursor {
    fn render(&self) -> String {
        let mut m = Message::default();
        m.set_named("dev", self.dev.to_string());
        m.set_named("ino", self.ino.to_string());
        m.set_named("head", &self.head);
        if let Some(t) = &self.tail {
            m.set_named("tail", t);
        }
        m.set_named("offset", self.offset.to_string());
        if let Some((end, seq)) = self.pending {
            m.set_named("pending_end", end.to_string());
            m.set_named("pending_after_seq", seq.to_string());
        }
        if let Some(t) = &self.session_due {
            m.set_named("session_due", t);
        }
        m.render()
    }

    fn parse(bytes: &[u8]) -> Option<Cursor> {
        let m = Message::parse_bytes(bytes).ok()?;
        let num = |k: &str| m.get_named(k).and_then(|v| v.parse::<u64>().ok());
        Some(Cursor {
            dev: num("dev")?,
            ino: num("ino")?,
            head: m.get_named("head")?.to_string(),
            tail: m.get_named("tail").map(str::to_string),
            offset: num("offset")?,
            pending: match (num("pending_end"), num("pending_after_seq")) {
                (Some(e), Some(s)) => Some((e, s)),
                _ => None,
            },
            session_due: m.get_named("session_due").map(str::to_string),
        })
    }
}

/// One follower: the role's worktree, its cursor file and lock.
pub struct Ingest {
    opts: Options,
    project: Project,
    wt: Worktree,
    cursor_path: PathBuf,
    tmp_dir: PathBuf,
    _lock: fsx::Lock,
    max: u64,
}

/// What happened to one line (for the caller's progress lines).
pub enum Event {
    Posted {
        offset: u64,
        path: PathBuf,
    },
    Recovered {
        offset: u64,
    },
    Skipped {
        offset: u64,
        why: String,
    },
    NewLog {
        why: String,
        session: Option<String>,
    },
}

impl Ingest {
    pub fn new(project: &Project, opts: Options) -> Result<Ingest> {
        let sender = Sender::as_role(project, &opts.role)?;
        fsx::set_fsync(sender.config.daemon.fsync);
        if let Some(bad) = opts
            .to
            .split(',')
            .find(|r| *r != grammar::ALL && sender.roles.find(r).is_none())
        {
            return Err(Error::bad_input(format!(
                "--to names '{}', which is neither `all` nor a role of {}\n  hint: use `all` or role names separated by commas",
                crate::text::escape(bad),
                project.roles_tsv().display()
            )));
        }
        let wt = sender.at.worktree.clone();
        let file = std::path::absolute(&opts.file).at(&opts.file)?;
        let key = hex(&Sha256::digest(
            format!("{}\0{}", opts.role, file.display()).as_bytes(),
        ))[..16]
            .to_string();
        let dir = wt.swarmforge().join("ingest");
        let tmp_dir = dir.join("tmp");
        fsx::ensure_dirs(&[&dir, &tmp_dir]).at(&dir)?;
        let lock_path = dir.join(format!("{key}.lock"));
        let Some(lock) = fsx::try_lock(&lock_path).at(&lock_path)? else {
            return Err(Error::conflict(format!(
                "another `swarm ingest` follows {} for role {} (lock {})\n  hint: stop it first; one follower per file and role keeps every line posted once",
                file.display(),
                opts.role,
                lock_path.display()
            )));
        };
        let max = sender.config.limits.max_file_bytes;
        Ok(Ingest {
            cursor_path: dir.join(format!("{key}.cursor")),
            opts: Options { file, ..opts },
            project: project.clone(),
            wt,
            tmp_dir,
            _lock: lock,
            max,
        })
    }

    /// The cursor file (for the docs and tests).
    pub fn cursor_path(&self) -> &Path {
        &self.cursor_path
    }

    fn load(&self) -> Result<Option<Cursor>> {
        match fsx::read_bounded(&self.cursor_path, 4096) {
            Ok(b) => Cursor::parse(&b).map(Some).ok_or_else(|| {
                Error::bad_file_hint(
                    &self.cursor_path,
                    "not an ingest cursor",
                    format!(
                        "remove it to read {} from its start again (lines may be posted twice)",
                        self.opts.file.display()
                    ),
                )
            }),
            Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::bad_file(&self.cursor_path, e)),
        }
    }

    fn save(&self, c: &Cursor) -> Result<()> {
        fsx::replace(&self.tmp_dir, &self.cursor_path, c.render().as_bytes()).at(&self.cursor_path)
    }

    /// Follows the file until `stop` says so (or once, with `--once`).
    pub fn run(&self, stop: &dyn Fn() -> bool, say: &mut dyn FnMut(Event)) -> Result<()> {
        let parent = self
            .opts
            .file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let mut watch = (!self.opts.once).then(|| DirWatch::new(vec![parent]));
        loop {
            self.pass(say)?;
            if self.opts.once || stop() {
                return Ok(());
            }
            if let Some(w) = watch.as_mut() {
                w.wait_for(RECHECK);
            }
            if stop() {
                return Ok(());
            }
        }
    }

    /// Reads every complete line past the cursor.
    fn pass(&self, say: &mut dyn FnMut(Event)) -> Result<()> {
        let mut f = match fsx::open_regular(&self.opts.file) {
            Ok(f) => f,
            // Not there (yet, or between a rotation's rename and create).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(&self.opts.file, e)),
        };
        let mut c = self.cursor(&mut f, say)?;
        loop {
            let Some((line, end)) = next_line(&mut f, c.offset)? else {
                return Ok(());
            };
            self.follow(&mut f, &mut c, line, end, say)?;
        }
    }

    /// The cursor to read on from: the saved one, or the start again (said)
    /// when the file was replaced, truncated or rewritten since; the new
    /// log's session opened first when one is due.
    fn cursor(&self, f: &mut File, say: &mut dyn FnMut(Event)) -> Result<Cursor> {
        let meta = f.metadata().at(&self.opts.file)?;
        let mut c = self.load()?.unwrap_or(Cursor {
            dev: meta.dev(),
            ino: meta.ino(),
            head: head_hash(f, 0)?,
            ..Cursor::default()
        });
        let why = if (c.dev, c.ino) != (meta.dev(), meta.ino()) {
            Some("the file was replaced")
        } else if meta.len() < c.offset {
            Some("the file was truncated")
        } else if head_hash(f, c.offset.min(HEAD_BYTES))? != c.head
            || c.tail
                .as_ref()
                .is_some_and(|t| tail_hash(f, c.offset).is_ok_and(|now| now != *t))
        {
            Some("the file was rewritten")
        } else {
            None
        };
        if let Some(why) = why {
            c = Cursor {
                dev: meta.dev(),
                ino: meta.ino(),
                head: head_hash(f, 0)?,
                tail: None,
                offset: 0,
                pending: None,
                session_due: self.opts.sessions.then(clock::iso_now),
            };
            self.save(&c)?;
            if !self.opts.sessions {
                say(Event::NewLog {
                    why: why.into(),
                    session: None,
                });
            }
        }
        if let Some(due) = c.session_due.clone() {
            let s = self.open_session(&due)?;
            c.session_due = None;
            self.save(&c)?;
            say(Event::NewLog {
                why: why.unwrap_or("a new log").into(),
                session: Some(s),
            });
        }
        Ok(c)
    }

    /// One line ending at `end` (`None`: too long): skipped, found posted
    /// already (a kill between the post and the cursor), or posted; the
    /// cursor is saved as pending before the post and moved past after it,
    /// so a line is posted once whatever is killed when.
    fn follow(
        &self,
        f: &mut File,
        c: &mut Cursor,
        line: Option<String>,
        end: u64,
        say: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let start = c.offset;
        let Some(line) = line else {
            self.past(f, c, end)?;
            say(Event::Skipped {
                offset: start,
                why: format!("line longer than {MAX_LINE_BYTES} bytes"),
            });
            return Ok(());
        };
        let Some(capture) = self.capture(&line) else {
            return self.past(f, c, end);
        };
        if let Some((pend_end, after_seq)) = c.pending {
            if pend_end == end && self.already_posted(after_seq, &capture) {
                self.past(f, c, end)?;
                say(Event::Recovered { offset: start });
                return Ok(());
            }
        }
        c.pending = Some((end, self.highest_seq()));
        self.save(c)?;
        let path = match self.post(&capture) {
            Ok(p) => p,
            // A refused draft (exit 2) would be refused again after
            // every restart: the line is skipped, the follower goes on.
            Err(e) if e.exit_code() == 2 => {
                self.past(f, c, end)?;
                let why = e.to_string().replace('\n', " ");
                say(Event::Skipped {
                    offset: start,
                    why: format!("the post was refused: {why}"),
                });
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        self.past(f, c, end)?;
        say(Event::Posted {
            offset: start,
            path,
        });
        Ok(())
    }

    /// Moves the cursor past the line ending at `end`, nothing pending.
    fn past(&self, f: &mut File, c: &mut Cursor, end: u64) -> Result<()> {
        c.offset = end;
        c.pending = None;
        self.save_advanced(f, c)
    }

    /// Saves the cursor moved past a line, with the head hash of the bytes
    /// now before it (the check hashes min(offset, 256) bytes) and the tail
    /// hash of the bytes just before it.
    fn save_advanced(&self, f: &mut File, c: &mut Cursor) -> Result<()> {
        c.head = head_hash(f, c.offset.min(HEAD_BYTES))?;
        c.tail = Some(tail_hash(f, c.offset)?);
        self.save(c)
    }

    /// The text to post: the group named `text`, else group 1, else the
    /// whole match; control characters dropped; None when it does not match
    /// or leaves nothing.
    fn capture(&self, line: &str) -> Option<String> {
        let caps = self.opts.pattern.captures(line)?;
        let m = caps
            .name("text")
            .or_else(|| caps.get(1))
            .or_else(|| caps.get(0))?;
        let text: String = m
            .as_str()
            .chars()
            .filter(|c| !c.is_control() || *c == '\t')
            .collect();
        let text = text.trim();
        let max = crate::protocol::types::POST.max_body.saturating_sub(1);
        let mut end = text.len().min(max);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        (!text.is_empty()).then(|| text[..end].to_string())
    }

    fn post(&self, text: &str) -> Result<PathBuf> {
        let sender = Sender::as_role(&self.project, &self.opts.role)?;
        let d = format!(
            "type: post\nto: {}\npriority: {}\n\n{text}\n",
            self.opts.to, self.opts.priority
        );
        let parsed = draft::parse_bytes(d.as_bytes());
        let shown = format!("ingest:{}", self.opts.file.display());
        Ok(send::submit(&sender, &parsed, &shown)?.path)
    }

    /// This role's files in outbox/, sent/ and failed/ (name, sequence).
    fn own_files(&self) -> Vec<(PathBuf, u64)> {
        let mut out = Vec::new();
        for dir in [self.wt.outbox(), self.wt.sent(), self.wt.failed()] {
            for e in store::each(&dir).filter(|e| e.is_handoff_named()) {
                if let Some(f) = grammar::FileName::parse(&e.name) {
                    let id = f.message_id();
                    if id.sender == self.opts.role {
                        out.push((e.path, id.seq));
                    }
                }
            }
        }
        out
    }

    fn highest_seq(&self) -> u64 {
        self.own_files().iter().map(|(_, s)| *s).max().unwrap_or(0)
    }

    /// A post of `text` by this role numbered above `after_seq` exists.
    fn already_posted(&self, after_seq: u64, text: &str) -> bool {
        self.own_files()
            .iter()
            .filter(|(_, s)| *s > after_seq)
            .any(|(p, _)| {
                fsx::read_bounded(p, self.max.saturating_add(4096))
                    .ok()
                    .and_then(|b| Message::parse_bytes(&b).ok())
                    .is_some_and(|m| m.type_name() == Some("post") && m.body.trim() == text)
            })
    }

    /// Closes the open session (reason `new_log`) and opens one for the new
    /// log, unless a session this role opened since `due` is open already
    /// (a restart after the session was opened).
    fn open_session(&self, due: &str) -> Result<String> {
        if let Some(open) = session::current(&self.project)? {
            if open.started_by == self.opts.role && open.started_at.as_str() >= due {
                return Ok(open.id);
            }
            crate::forum::requests::session_close(&self.project, Some(&open.id), "new_log")?;
        }
        let title = format!(
            "log {}",
            self.opts
                .file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        let title: String = crate::text::escape(&title).chars().take(200).collect();
        Ok(crate::forum::requests::session_start(&self.project, Some(&title), &self.opts.role)?.id)
    }
}

/// sha256 (hex) of the file's first `n` bytes.
fn head_hash(f: &mut File, n: u64) -> Result<String> {
    range_hash(f, 0, n)
}

/// sha256 (hex) of the min(offset, 256) bytes before `offset`.
fn tail_hash(f: &mut File, offset: u64) -> Result<String> {
    let n = offset.min(HEAD_BYTES);
    range_hash(f, offset - n, n)
}

/// sha256 (hex) of `n` bytes of the file from `from`.
fn range_hash(f: &mut File, from: u64, n: u64) -> Result<String> {
    let mut buf = Vec::with_capacity(n as usize);
    f.seek(SeekFrom::Start(from))
        .map_err(|e| Error::env(format!("seek: {e}")))?;
    f.by_ref()
        .take(n)
        .read_to_end(&mut buf)
        .map_err(|e| Error::env(format!("read: {e}")))?;
    Ok(hex(&Sha256::digest(&buf)))
}

/// The complete line starting at `offset` and the offset after its newline;
/// None when no newline has arrived yet. A line longer than
/// [`MAX_LINE_BYTES`] comes back as `(None, end)`; invalid UTF-8 is read
/// lossily.
fn next_line(f: &mut File, offset: u64) -> Result<Option<(Option<String>, u64)>> {
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::env(format!("seek: {e}")))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut too_long = false;
    let mut pos = offset;
    loop {
        let n = f
            .read(&mut chunk)
            .map_err(|e| Error::env(format!("read: {e}")))?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(i) = chunk[..n].iter().position(|b| *b == b'\n') {
            let end = pos + i as u64 + 1;
            if too_long || buf.len() + i > MAX_LINE_BYTES {
                return Ok(Some((None, end)));
            }
            buf.extend_from_slice(&chunk[..i]);
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Some((
                Some(String::from_utf8_lossy(&buf).into_owned()),
                end,
            )));
        }
        pos += n as u64;
        if !too_long {
            buf.extend_from_slice(&chunk[..n]);
            if buf.len() > MAX_LINE_BYTES {
                too_long = true;
                buf.clear();
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips() {
        let c = Cursor {
            dev: 1,
            ino: 2,
            head: "ab".into(),
            tail: Some("cd".into()),
            offset: 30,
            pending: Some((40, 7)),
            session_due: None,
        };
        assert_eq!(Cursor::parse(c.render().as_bytes()), Some(c));
        assert_eq!(Cursor::parse(b"offset: x\n\n"), None);
    }

    #[test]
    fn lines_wait_for_their_newline() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        std::fs::write(&p, "one\r\ntw").unwrap();
        let mut f = File::open(&p).unwrap();
        assert_eq!(next_line(&mut f, 0).unwrap(), Some((Some("one".into()), 5)));
        assert_eq!(next_line(&mut f, 5).unwrap(), None);
        std::fs::write(&p, format!("{}\nok\n", "x".repeat(MAX_LINE_BYTES + 10))).unwrap();
        let mut f = File::open(&p).unwrap();
        let (line, end) = next_line(&mut f, 0).unwrap().unwrap();
        assert_eq!(line, None);
        assert_eq!(
            next_line(&mut f, end).unwrap(),
            Some((Some("ok".into()), end + 3))
        );
    }
}
