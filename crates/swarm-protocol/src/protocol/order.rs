//! The order hint: what `ready-next` and `done-current` ask the daemon instead
//! of listing a deep `inbox/new/` (docs/benchmarks.md, "Costs that must not
//! grow").
//!
//! The daemon keeps each asked folder's hand-out order in memory, from a
//! listing and then from the folder's file events, which the kernel queues
//! before a rename returns: an answer reflects every entry placed before the
//! question, by our daemon, SwarmForge's or a person. It stays a hint: the
//! folder is the truth (the caller's move checks each name it takes), and a
//! caller without an answer lists the folder as before.
//!
//! One question and one answer per connection to `.swarmforge/daemon/order.sock`,
//! in lines:
//!
//! ```text
//! new <absolute path of the inbox/new folder>
//! ```
//!
//! ```text
//! ok <items> <odd>
//! <name>            (up to HEAD item names, in hand-out order)
//! end
//! ```
//!
//! or `no <reason>` when the daemon does not serve that folder.
//!
//! The second question, `answers <path>`, is what a `ready-next` resuming
//! an item in process asks: which waiting items may be `answer`s to hand
//! out with it. The daemon reads the head of each item it indexes once, in
//! the background, and names every item it has not ruled out (an `answer`,
//! or one not read yet), in hand-out order, with `<items>` their number;
//! the caller reads those and checks each as before. An item is ruled out
//! only when [`may_be_answer`] says it cannot be one, which the caller's own
//! check would also say, so the names cover every answer the caller would
//! have found by reading the whole folder. More than [`HEAD`] of them, or
//! any odd entry, and the caller reads the folder itself.

use std::path::{Path, PathBuf};

use crate::protocol::grammar;
use crate::protocol::header::Message;

/// Item names per answer: enough for the reactions ahead of the next work
/// item in any realistic queue; a caller that runs through them lists.
pub const HEAD: usize = 32;

/// A `new/` folder whose directory is at least this large (bytes, as `stat`
/// reports it: on ext4 and tmpfs it grows with the entries) asks the daemon;
/// a smaller one is listed, which is then as cheap as the question.
pub const DEEP_DIR_BYTES: u64 = 64 * 1024;

/// The longest question read (a path and the verb).
pub const MAX_QUESTION: usize = 4096 + 8;

/// The longest answer read: HEAD names of at most 255 bytes, the lines around.
pub const MAX_ANSWER: usize = 64 + HEAD * 256 + 8;

/// What a question asks of a folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// The first items in hand-out order (`new`).
    Head,
    /// The items that may be answers (`answers`).
    Answers,
}

impl Ask {
    fn verb(self) -> &'static str {
        match self {
            Ask::Head => "new",
            Ask::Answers => "answers",
        }
    }
}

/// The question for `new_dir`; `None` when its path cannot travel on one
/// line (not UTF-8, a control character, not absolute, too long).
pub fn question(ask: Ask, new_dir: &Path) -> Option<String> {
    let s = new_dir.to_str()?;
    let verb = ask.verb();
    let ok = new_dir.is_absolute()
        && s.len() + verb.len() + 2 <= MAX_QUESTION
        && !s.chars().any(crate::text::is_control);
    ok.then(|| format!("{verb} {s}\n"))
}

/// What a question asks and of which folder (untrusted input: `None` unless
/// well formed).
pub fn parse_question(text: &str) -> Option<(Ask, PathBuf)> {
    let line = text.strip_suffix('\n')?;
    let (ask, path) = [Ask::Head, Ask::Answers]
        .into_iter()
        .find_map(|a| Some((a, line.strip_prefix(a.verb())?.strip_prefix(' ')?)))?;
    let ok = path.starts_with('/')
        && line.len() < MAX_QUESTION
        && !path.chars().any(crate::text::is_control);
    ok.then(|| (ask, PathBuf::from(path)))
}

/// How much of a file the daemon reads to tell whether it may be an answer.
pub const HEAD_BYTES: usize = 64 * 1024;

/// Whether a file beginning with `start` (the whole file when `whole`) may
/// be an `answer`: false only when a caller reading it whole would not take
/// it as one (its header block does not parse, or names another type).
pub fn may_be_answer(start: &[u8], whole: bool) -> bool {
    let end = if start.starts_with(b"\n") {
        Some(0)
    } else {
        start.windows(2).position(|w| w == b"\n\n").map(|i| i + 1)
    };
    let Some(end) = end else {
        // No end of the header block in what was read: only a longer file
        // can still hold one.
        return !whole;
    };
    match Message::parse_bytes(&start[..=end]) {
        Ok(m) => m.type_name() == Some(crate::protocol::types::ANSWER.name),
        Err(_) => false,
    }
}

/// What the daemon knows of one folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Items waiting.
    pub items: usize,
    /// Entries named `*.handoff` that are not items (the caller lists, and
    /// refuses them, as before).
    pub odd: usize,
    /// The first items in hand-out order, at most [`HEAD`].
    pub head: Vec<String>,
}

pub fn render_answer(a: &Answer) -> String {
    let mut s = format!("ok {} {}\n", a.items, a.odd);
    for n in a.head.iter().take(HEAD) {
        s.push_str(n);
        s.push('\n');
    }
    s.push_str("end\n");
    s
}

pub fn render_refusal(reason: &str) -> String {
    let reason: String = reason
        .chars()
        .map(|c| if crate::text::is_control(c) { ' ' } else { c })
        .collect();
    format!("no {reason}\n")
}

/// An answer (`None` for a refusal or anything malformed: every name must be
/// a valid item name, and no more than [`HEAD`] of them).
pub fn parse_answer(text: &str) -> Option<Answer> {
    let mut lines = text.strip_suffix("end\n")?.lines();
    let mut first = lines.next()?.strip_prefix("ok ")?.split(' ');
    let items = first.next()?.parse().ok()?;
    let odd = first.next()?.parse().ok()?;
    if first.next().is_some() {
        return None;
    }
    let head: Vec<String> = lines.map(str::to_string).collect();
    let ok = head.len() <= HEAD
        && head.len() <= items
        && head.iter().all(|n| grammar::valid_handoff_name(n));
    ok.then_some(Answer { items, odd, head })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_and_answers_round_trip_and_bad_ones_are_refused() {
        let dir = Path::new("/p/.swarmforge/handoffs/inbox/new");
        for ask in [Ask::Head, Ask::Answers] {
            let q = question(ask, dir).unwrap();
            assert_eq!(parse_question(&q).unwrap(), (ask, dir.to_path_buf()));
        }
        assert!(question(Ask::Head, Path::new("relative/new")).is_none());
        assert!(question(Ask::Answers, Path::new("/a\nb")).is_none());
        for bad in [
            "new relative\n",
            "new /a\u{1b}b\n",
            "new /a",
            "old /a\n",
            "answers/a\n",
            "newer /a\n",
            "",
        ] {
            assert!(parse_question(bad).is_none(), "{bad:?}");
        }
        let a = Answer {
            items: 3,
            odd: 1,
            head: vec!["50_20260615T140531Z_000001_from_a_to_b.handoff".into()],
        };
        assert_eq!(parse_answer(&render_answer(&a)).unwrap(), a);
        let none = Answer {
            items: 0,
            odd: 0,
            head: vec![],
        };
        assert_eq!(parse_answer(&render_answer(&none)).unwrap(), none);
        for bad in [
            "ok 1 0\n../x.handoff\nend\n",
            "ok 0 0\n50_20260615T140531Z_000001_from_a_to_b.handoff\nend\n",
            "ok 1 0\n",
            "ok x 0\nend\n",
            "ok 1 0 9\nend\n",
            "no not served\n",
        ] {
            assert!(parse_answer(bad).is_none(), "{bad:?}");
        }
        assert_eq!(render_refusal("a\nb"), "no a b\n");
    }

    #[test]
    fn only_a_file_that_cannot_be_an_answer_is_ruled_out() {
        let answer = b"id: x\ntype: answer\nin_reply_to: y\n\nbody\n";
        assert!(may_be_answer(answer, true));
        // Cut before the end of its headers: it may still be one.
        assert!(may_be_answer(&answer[..10], false));
        assert!(!may_be_answer(&answer[..10], true));
        assert!(!may_be_answer(b"id: x\ntype: note\n\nbody\n", true));
        assert!(!may_be_answer(b"id: x\n\ntype: answer\n", true));
        assert!(!may_be_answer(b"\ntype: answer\n\n", true));
        assert!(!may_be_answer(b"type: answer\nbad line\n\n", true));
        assert!(!may_be_answer(b"type: ans\x01wer\n\n", true));
        // A body the caller's parse refuses is its business: named.
        assert!(may_be_answer(b"type: answer\n\n\x01", true));
    }
}
