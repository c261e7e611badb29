//! Which messages the transcript shows and in what order: the filter, the
//! order messages were said in, threads, reactions.

use crate::protocol::header::names;
use std::collections::HashMap;

use crate::error::Error;
use crate::protocol::clock::{self, Instant};
use crate::protocol::duration;
use crate::protocol::grammar::MessageType;
use crate::protocol::header::Message;
use crate::protocol::line::when;
use crate::protocol::roles::Roles;
use crate::protocol::trail::{Original, Place};
use crate::text;

/// Which messages to show.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Sent or received by this role (`to: all` counts for everyone else).
    pub role: Option<String>,
    pub kind: Option<String>,
    pub task: Option<String>,
    /// Inclusive.
    pub since: Option<Instant>,
    /// Exclusive.
    pub until: Option<Instant>,
    /// Only this conversation: the message with this id (the thread's root)
    /// and every message whose `thread` header names it.
    pub thread: Option<String>,
    /// Only messages stamped with this forum session.
    pub session: Option<String>,
}

impl Filter {
    pub fn matches(&self, msg: &Message, roles: &Roles) -> bool {
        if let Some(k) = &self.kind {
            if msg.type_name() != Some(k.as_str()) {
                return false;
            }
        }
        if let Some(t) = &self.task {
            if msg.get(names::TASK) != Some(t.as_str()) {
                return false;
            }
        }
        if let Some(sess) = &self.session {
            if msg.session() != Some(sess.as_str()) {
                return false;
            }
        }
        if let Some(root) = &self.thread {
            if msg.id() != Some(root.as_str()) && msg.thread() != Some(root.as_str()) {
                return false;
            }
        }
        if let Some(r) = &self.role {
            let from = msg.sender().unwrap_or("");
            let to = msg.to().unwrap_or("");
            if from != r && !roles.recipients(to, from).contains(r) {
                return false;
            }
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(t) = when(msg) else {
                return false;
            };
            if self.since.is_some_and(|s| t < s) || self.until.is_some_and(|u| t >= u) {
                return false;
            }
        }
        true
    }
}

/// Parses `--since`/`--until`: RFC 3339, or an age such as `90s`, `2h`, `1d`
/// meaning that long before `now`.
pub fn parse_time(spec: &str, now: Instant) -> Result<Instant, Error> {
    if let Some(t) = clock::parse(spec) {
        return Ok(t);
    }
    match duration::parse(spec) {
        Ok(d) => chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_sub_signed(d))
            .ok_or_else(|| {
                Error::bad_input(format!("time '{}' is out of range", text::escape(spec)))
            }),
        Err(_) => Err(Error::bad_input(format!(
            "invalid time '{}': expected RFC 3339 (2026-06-15T14:05:31Z) or an age (90s, 2h, 1d)",
            text::escape(spec)
        ))),
    }
}

/// Every message once: originals de-duplicated by id (a copy in `sent/` wins
/// over `failed/`, which wins over `outbox/`), sorted by time then id.
pub fn messages(originals: &[Original]) -> Vec<&Original> {
    let rank = |p: Place| match p {
        Place::Sent => 0,
        Place::Failed => 1,
        _ => 2,
    };
    let mut best: HashMap<&str, &Original> = HashMap::new();
    let mut out: Vec<&Original> = Vec::new();
    for o in originals {
        let id = o.id();
        if id.is_empty() {
            out.push(o);
            continue;
        }
        match best.get(id) {
            Some(b) if (rank(b.place), &b.path) <= (rank(o.place), &o.path) => {}
            _ => {
                best.insert(id, o);
            }
        }
    }
    out.extend(best.into_values());
    sort(&mut out);
    out
}

/// Time, then id, then path (a total order, so output is reproducible).
pub fn sort(v: &mut [&Original]) {
    v.sort_by_cached_key(|o| (o.when(), o.id().to_string(), o.path.clone()));
}

/// The root of the conversation `id` belongs to: its `thread` header, or
/// itself (a message that starts a thread has none).
pub fn thread_root<'a>(originals: &[&'a Original], id: &'a str) -> &'a str {
    originals
        .iter()
        .find(|o| o.id() == id)
        .and_then(|o| o.msg.thread())
        .unwrap_or(id)
}

/// One conversation as a tree: each message after its parent (`in_reply_to`)
/// and that parent's earlier replies, siblings by time; a reply whose parent
/// is not in the thread hangs under the root. Returns (message, depth).
pub fn thread_order<'a>(members: &[&'a Original], root: &str) -> Vec<(&'a Original, usize)> {
    let ids: HashMap<&str, usize> = members
        .iter()
        .enumerate()
        .map(|(i, o)| (o.id(), i))
        .collect();
    let has_root = ids.contains_key(root);
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); members.len()];
    let mut tops: Vec<usize> = Vec::new();
    for (i, o) in members.iter().enumerate() {
        let parent = o
            .msg
            .in_reply_to()
            .and_then(|p| ids.get(p).copied())
            .filter(|&p| p != i);
        match parent {
            Some(p) => children[p].push(i),
            None if o.id() != root && has_root => children[ids[root]].push(i),
            None => tops.push(i),
        }
    }
    // `members` is sorted by time, so every list already is.
    let mut out = Vec::with_capacity(members.len());
    let mut done = vec![false; members.len()];
    let mut stack: Vec<(usize, usize)> = tops.iter().rev().map(|&i| (i, 0)).collect();
    loop {
        while let Some((i, depth)) = stack.pop() {
            if done[i] {
                continue;
            }
            done[i] = true;
            out.push((members[i], depth));
            for &c in children[i].iter().rev() {
                stack.push((c, depth + 1));
            }
        }
        // A reply cycle (only planted files can make one) has no top: start
        // it at its oldest message.
        match done.iter().position(|d| !d) {
            Some(i) => stack.push((i, 0)),
            None => break,
        }
    }
    out
}

/// Reactions shown beside the message they answer: (reaction, from) by the
/// id reacted to, in time order. Only targets among `all` are keys, so a
/// reaction to a message outside the transcript still prints as its own line.
pub fn reaction_marks(all: &[&Original]) -> HashMap<String, Vec<(String, String)>> {
    let ids: std::collections::HashSet<&str> = all.iter().map(|o| o.id()).collect();
    let mut marks: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for o in all {
        if o.msg.kind() != Some(MessageType::React) {
            continue;
        }
        let Some(target) = o.msg.in_reply_to().filter(|t| ids.contains(t)) else {
            continue;
        };
        marks.entry(target.to_string()).or_default().push((
            o.msg.get(names::REACTION).unwrap_or("unknown").to_string(),
            o.msg.sender().unwrap_or("unknown").to_string(),
        ));
    }
    marks
}

/// Whether `o` is a reaction folded into its target's line.
pub fn is_folded(o: &Original, marks: &HashMap<String, Vec<(String, String)>>) -> bool {
    o.msg.kind() == Some(MessageType::React)
        && o.msg.in_reply_to().is_some_and(|t| marks.contains_key(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times() {
        let now = clock::parse("2026-06-15T14:00:00Z").unwrap();
        assert_eq!(
            clock::iso(parse_time("2h", now).unwrap()),
            "2026-06-15T12:00:00.000000Z"
        );
        assert!(parse_time("yesterday", now).is_err());
    }
}
