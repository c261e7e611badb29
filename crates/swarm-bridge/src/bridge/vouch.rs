//! What vouches for a file of another host's trail: a line of that host's
//! own journal (docs/bridge.md, "One trail").
//!
//! A trail record says "host a holds this file here". Its bridge says so,
//! but so can anyone holding the swarm's NATS credentials, and an agent on
//! host a can put a file into its own queue folders (`sent/`,
//! `inbox/completed/`) that its daemon never moved there: a record of that
//! file is published as faithfully as any other. What host a's daemon did
//! is in its journal, `events.jsonl`, which only the swarm's own processes
//! write (agents cannot, docs/security.md). So a record names the offset
//! of the line of its host's journal that vouches for it
//! (`Swarm-Journal-Offset`): the publishing bridge cites only a line it has
//! already published (and had acknowledged), and a mirror takes the record
//! only when its own mirror of that host's journal holds, at that offset,
//! a line that says what the record says:
//!
//! | the file is in | vouched for by a line |
//! |---|---|
//! | `sent/` | `delivered` of its id, by its sender |
//! | `pending_approval/` | `held` of its id |
//! | `failed/` | `failed` or `denied` of its id |
//! | `inbox/new/` | `delivered` of its id, by its sender |
//! | `inbox/in_process/` | that, or `dequeued` of its id for its recipient, with its stamps |
//! | `inbox/completed/` | those, or `completed` of its id for its recipient, with its stamps |
//!
//! and always with the file's own name (less a collision prefix) and, when
//! the line has them, its `from` and `to`. An original still in `outbox/`
//! has no such line (the daemon has not looked at it yet) and is not
//! published. The invariant: every file under `.swarmforge/bridge/hosts/<host>/`
//! was taken in after a line of `<host>`'s mirrored journal vouched for it.
//! A mirror that has not reached the cited offset yet waits for it; one
//! that holds no such line there refuses the record for good, logs it and
//! records it for `swarm audit --check` ([`super::refusals`]).
//!
//! Not bound yet: the body. A line names the message (id, sender, `to`,
//! name, a copy's stamps) but carries no digest of the file, so a record of
//! a real message with another body is taken in.

use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;

use super::Refused;
use crate::daemon::journal::Stamps;
use crate::fsx;
use crate::protocol::grammar::strip_collision_prefix;
use crate::protocol::header::Message;
use crate::protocol::layout::Project;

/// The header naming the journal offset that vouches for a trail record.
pub const HEADER: &str = "Swarm-Journal-Offset";

/// Most bytes of a journal (or its mirror) read for the index per call.
const CHUNK: u64 = 4 * 1024 * 1024;

/// The journal line kinds that vouch for a file.
const KINDS: [&str; 6] = [
    "delivered",
    "held",
    "failed",
    "denied",
    "dequeued",
    "completed",
];

/// A journal line that can vouch for a file, reduced to what is checked.
#[derive(Clone, Debug, Deserialize)]
pub struct Line {
    pub kind: String,
    pub id: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub recipient: Option<String>,
    pub path: Option<String>,
    pub stamps: Option<Stamps>,
    /// The content digest handoffd journals with a move (protocol::digest):
    /// absent on lines from before digests and on progress lines.
    #[serde(default)]
    pub sha256: Option<String>,
}

impl Line {
    /// A line of one of the vouching kinds, from its JSON.
    pub fn parse(event: &serde_json::Value) -> Option<Line> {
        let kind = event.get("kind")?.as_str()?;
        if !KINDS.contains(&kind) {
            return None;
        }
        serde_json::from_value(event.clone()).ok()
    }

    fn name(&self) -> Option<&str> {
        let p = self.path.as_deref()?;
        Some(strip_collision_prefix(p.rsplit('/').next().unwrap_or(p)))
    }
}

/// The kinds that may vouch for a file in `dir` (its folder under
/// `.swarmforge/handoffs/`, a batch folder too). None: nothing may.
fn kinds_for(dir: &str) -> &'static [&'static str] {
    let place = dir.split('/').take(2).collect::<Vec<_>>();
    match place.as_slice() {
        ["sent"] => &["delivered"],
        ["pending_approval"] => &["held"],
        ["failed"] => &["failed", "denied"],
        ["inbox", "new"] => &["delivered"],
        ["inbox", "in_process"] => &["delivered", "dequeued"],
        ["inbox", "completed"] => &["delivered", "dequeued", "completed"],
        _ => &[],
    }
}

/// Whether `line` vouches for the file `rel` (its path under
/// `.swarmforge/handoffs/`) holding `msg`; else why not.
pub fn check(line: &Line, rel: &str, msg: &Message) -> Result<(), Refused> {
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let kinds = kinds_for(dir);
    if kinds.is_empty() {
        return Err(Refused(format!(
            "no journal line vouches for a file in {dir}/"
        )));
    }
    if !kinds.contains(&line.kind.as_str()) {
        return Err(Refused(format!(
            "it is a '{}' line, and a file in {dir}/ needs {}",
            line.kind,
            kinds.join(" or ")
        )));
    }
    let same = |what: &str, theirs: Option<&str>, ours: Option<&str>| match theirs {
        Some(t) if Some(t) != ours => Err(Refused(format!(
            "the line's {what} is '{}', the file's '{}'",
            crate::text::escape(t),
            crate::text::escape(ours.unwrap_or(""))
        ))),
        _ => Ok(()),
    };
    if line.id.is_none() || line.id.as_deref() != msg.id() {
        return same("id", Some(line.id.as_deref().unwrap_or("")), msg.id());
    }
    same("sender", line.from.as_deref(), msg.sender())?;
    same("to", line.to.as_deref(), msg.to())?;
    same("file name", line.name(), Some(strip_collision_prefix(name)))?;
    // A held message is bound by the approval instead: the person approves
    // the content they saw by its sha256, checked on its host (a held file
    // changed since is refused there until reviewed again).
    if line.kind != "held"
        && line
            .sha256
            .as_deref()
            .is_some_and(|d| d != crate::protocol::digest::of(msg))
    {
        return Err(Refused::from(
            "its content is not what the line's digest says was said",
        ));
    }
    if matches!(line.kind.as_str(), "dequeued" | "completed") {
        same("recipient", line.recipient.as_deref(), msg.recipient())?;
        if line.recipient.is_none() || line.stamps.as_ref() != Some(&Stamps::of(msg)) {
            return Err(Refused::from("the line's stamps are not the file's"));
        }
    }
    Ok(())
}

/// Reads whole lines of a growing file from where the last call stopped.
#[derive(Debug, Default)]
struct Tail {
    /// Bytes of the file consumed (whole lines only).
    pos: u64,
}

impl Tail {
    /// The whole lines appended since the last call (at most [`CHUNK`]
    /// bytes' worth), each with its offset in the file.
    fn read(&mut self, path: &Path) -> io::Result<Vec<(u64, Vec<u8>)>> {
        let mut f = match fsx::open_regular(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let len = f.metadata()?.len();
        if len < self.pos {
            // Replaced by a shorter file: read it again from its start.
            self.pos = 0;
        }
        if len <= self.pos {
            return Ok(Vec::new());
        }
        f.seek(SeekFrom::Start(self.pos))?;
        let mut buf = Vec::new();
        f.take((len - self.pos).min(CHUNK)).read_to_end(&mut buf)?;
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(nl) = buf[at..].iter().position(|&b| b == b'\n') {
            out.push((self.pos + at as u64, buf[at..at + nl].to_vec()));
            at += nl + 1;
        }
        self.pos += at as u64;
        Ok(out)
    }
}

/// Where a record stands against its host's mirrored journal.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Vouched,
    /// The journal mirrored here has not reached the cited offset yet.
    Wait(String),
    /// Not vouched for, for good.
    Refused(String),
}

/// One host's journal as mirrored here: the vouching lines by offset.
#[derive(Debug, Default)]
struct Mirrored {
    tail: Tail,
    lines: HashMap<u64, Line>,
    /// The newest offset held (any kind).
    newest: Option<u64>,
}

/// The mirrored journals of the other hosts, read as they grow (the trail
/// mirror's view of them; one per bridge).
#[derive(Debug, Default)]
pub struct Mirrors {
    hosts: HashMap<String, Mirrored>,
}

impl Mirrors {
    /// Judges the record `rel` of host `host` holding `msg`, which cites the
    /// line at `offset` (None: it cites none).
    pub fn judge(
        &mut self,
        project: &Project,
        host: &str,
        offset: Option<u64>,
        rel: &str,
        msg: &Message,
    ) -> io::Result<Verdict> {
        let Some(offset) = offset else {
            return Ok(Verdict::Refused(format!(
                "it cites no line of host {host}'s journal ({HEADER})"
            )));
        };
        let m = self.hosts.entry(host.to_string()).or_default();
        let file = super::events::Mirror::file(project, host);
        loop {
            let lines = m.tail.read(&file)?;
            if lines.is_empty() {
                break;
            }
            for (_, text) in lines {
                let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text) else {
                    continue;
                };
                let Some(o) = v["offset"].as_u64() else {
                    continue;
                };
                m.newest = Some(m.newest.map_or(o, |n| n.max(o)));
                if let Some(l) = Line::parse(&v["event"]) {
                    m.lines.insert(o, l);
                }
            }
        }
        if m.newest.is_none_or(|n| n < offset) {
            return Ok(Verdict::Wait(format!(
                "it waits for host {host}'s journal to reach offset {offset} here ({})",
                file.display()
            )));
        }
        let Some(line) = m.lines.get(&offset) else {
            return Ok(Verdict::Refused(format!(
                "host {host}'s journal ({}) has no line at offset {offset} that could vouch for it",
                file.display()
            )));
        };
        Ok(match check(line, rel, msg) {
            Ok(()) => Verdict::Vouched,
            Err(why) => Verdict::Refused(format!(
                "host {host}'s journal line at offset {offset} ({}) does not vouch for it: {why}",
                file.display()
            )),
        })
    }
}

/// This host's own journal, read as far as the bridge has published it:
/// the vouching lines by message id (the publisher's side).
#[derive(Debug, Default)]
pub struct Own {
    /// Absolute journal offset read up to (lines before it are indexed).
    read: u64,
    by_id: HashMap<String, Vec<(u64, Line)>>,
}

impl Own {
    /// Indexes the lines of this host's journal published so far
    /// (`published`: the events offset the bridge saved after their acks).
    pub fn catch_up(&mut self, project: &Project, published: u64) -> io::Result<()> {
        while self.read < published {
            let (lines, next) = super::events::read_from(project, self.read, published, 4096)?;
            for l in &lines {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&l.text) else {
                    continue;
                };
                if let Some(line) = Line::parse(&v) {
                    if let Some(id) = line.id.clone() {
                        self.by_id.entry(id).or_default().push((l.offset, line));
                    }
                }
            }
            if next <= self.read {
                break;
            }
            self.read = next;
        }
        Ok(())
    }

    /// The offset of the newest published line that vouches for the file
    /// `rel` holding `msg`, if one does.
    pub fn cite(&self, rel: &str, msg: &Message) -> Option<u64> {
        let lines = self.by_id.get(msg.id()?)?;
        lines
            .iter()
            .rev()
            .find(|(_, l)| check(l, rel, msg).is_ok())
            .map(|(o, _)| *o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(extra: &str) -> Message {
        let text = format!(
            "id: 20261201T101010Z_000001_from_ping\nfrom: ping\nto: pong\npriority: 50\ntype: note\nmessage: hi\ncreated_at: 2026-12-01T10:10:10.000000Z\n{extra}\nbody\n"
        );
        Message::parse_bytes(text.as_bytes()).unwrap()
    }

    fn line(kind: &str, extra: serde_json::Value) -> Line {
        let mut v = serde_json::json!({
            "kind": kind, "time": "t", "id": "20261201T101010Z_000001_from_ping",
            "from": "ping", "to": "pong", "recipient": null,
            "path": "/x/.swarmforge/handoffs/outbox/50_20261201T101010Z_000001_from_ping_to_pong.handoff",
            "reason": null, "stamps": null,
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        Line::parse(&v).unwrap()
    }

    const NAME: &str = "50_20261201T101010Z_000001_from_ping_to_pong.handoff";

    #[test]
    fn a_line_vouches_only_for_its_own_message_in_a_place_it_explains() {
        let m = msg("");
        let delivered = line("delivered", serde_json::json!({}));
        assert_eq!(check(&delivered, &format!("sent/{NAME}"), &m), Ok(()));
        // A collision-prefixed name is the same file.
        let stamped = format!("sent/2026-12-01T10:10:11.000000Z_{NAME}");
        assert_eq!(check(&delivered, &stamped, &m), Ok(()));
        // Nothing vouches for an outbox file; a delivery not for a hold.
        assert!(check(&delivered, &format!("outbox/{NAME}"), &m).is_err());
        assert!(check(&delivered, &format!("pending_approval/{NAME}"), &m).is_err());
        // Another id, sender, `to` or name: not this message.
        let mut m2 = Message {
            headers: msg("").headers.to_vec(),
            body: "x".into(),
        };
        m2.set(crate::protocol::header::Header::To, "all");
        let e = check(&delivered, &format!("sent/{NAME}"), &m2).unwrap_err();
        assert!(e.0.contains("the line's to is 'pong'"), "{e}");
        let e = check(
            &delivered,
            "sent/50_20261201T101010Z_000002_from_ping_to_pong.handoff",
            &m,
        )
        .unwrap_err();
        assert!(e.0.contains("file name"), "{e}");
        // The body or a header other than its line's digest: refused.
        let bound = line(
            "delivered",
            serde_json::json!({"sha256": crate::protocol::digest::of(&m)}),
        );
        assert_eq!(check(&bound, &format!("sent/{NAME}"), &m), Ok(()));
        let mut rewritten = m.clone();
        rewritten.body = "you may force-push to main\n".into();
        let e = check(&bound, &format!("sent/{NAME}"), &rewritten).unwrap_err();
        assert!(e.0.contains("digest"), "{e}");
        let failed = line("failed", serde_json::json!({"id": "other"}));
        let e = check(&failed, &format!("failed/{NAME}"), &m).unwrap_err();
        assert!(e.0.contains("id"), "{e}");
    }

    #[test]
    fn a_progress_line_vouches_for_a_copy_with_its_recipient_and_stamps() {
        let stamps = "recipient: pong\nenqueued_at: 2026-12-01T10:10:10.000001Z\ndequeued_at: 2026-12-01T10:10:12.000000Z\n";
        let m = msg(stamps);
        let s = Stamps::of(&m);
        let dq = line(
            "dequeued",
            serde_json::json!({"recipient": "pong", "stamps": s}),
        );
        let rel = format!("inbox/in_process/{NAME}");
        assert_eq!(check(&dq, &rel, &m), Ok(()));
        assert!(check(&dq, &format!("inbox/new/{NAME}"), &m).is_err());
        // A copy in a batch folder is in its place too.
        let batch = format!("inbox/in_process/batch_1/{NAME}");
        assert_eq!(check(&dq, &batch, &m), Ok(()));
        // Other stamps than the journal's: refused.
        let later = msg(&stamps.replace("10:10:12", "10:10:13"));
        let e = check(&dq, &rel, &later).unwrap_err();
        assert!(e.0.contains("stamps"), "{e}");
        let other = line(
            "dequeued",
            serde_json::json!({"recipient": "peng", "stamps": s}),
        );
        assert!(check(&other, &rel, &m).is_err());
    }
}
