//! An indexed item's name, compact (issue 47: a daemon holding 100 000
//! waiting items must stay within 20 MB). A name the daemon builds,
//! `<NN>_<IDTS>_<SEQ><tail>` with `tail` = `_from_<sender>_to_<recipients>.handoff`,
//! is kept as two numbers and a tail shared by every item of the same
//! sender and recipients (interned per folder by [`Tails`]): 24 bytes an
//! item, its text rendered only when a caller is told it. Any other name
//! (a collision prefix, an IDTS that is not 14 digits in place, a name of
//! no known shape) is kept whole, with its sort key.
//!
//! The invariant: names order exactly as `grammar::sort_key` then the text
//! order them (the hand-out order), and a name renders back to the very
//! text it was made from; `tests::compact_names_keep_the_text_and_the_hand_out_order`
//! holds both against the grammar.

use std::borrow::{Borrow, Cow};
use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::protocol::grammar::{self, FileName, SortKey};

/// Marks a name kept whole (no packed head reaches it: see [`Name::head`]).
const WHOLE: u64 = u64::MAX;
/// Widest sequence number the grammar accepts (`MessageId::parse`).
const MAX_WIDTH: u64 = 18;

#[derive(Clone)]
pub(super) struct Name {
    /// Packed: the priority's two bytes (bits 62..47) then the IDTS's 14
    /// digits as a number (bits 46..0; 10^14 < 2^47), so comparing heads
    /// compares priority then second. [`WHOLE`] for a name kept whole.
    head: u64,
    /// Packed: the sequence number (< 10^18 < 2^60) shifted left by 4, its
    /// low 4 bits `18 - width`: of two equal numbers the one written wider
    /// comes first, as the text order puts it (its extra leading `0` meets a
    /// digit of the narrower, or the narrower's `_`, both greater).
    seq: u64,
    tail: Arc<Tail>,
}

struct Tail {
    /// Packed: what follows the sequence number; whole: the name.
    text: Box<str>,
    /// A name kept whole: its sort key.
    key: Option<SortKey>,
}

impl Name {
    /// `text` packed with a tail from `tails`, added there when new.
    pub(super) fn intern(text: &str, tails: &mut Tails) -> Name {
        match pack(text) {
            Some((head, seq, tail)) => Name {
                head,
                seq,
                tail: tails.get_or_add(tail),
            },
            None => Name::whole(text),
        }
    }

    /// `text` as a key to look an item up by: `None` when no item of
    /// `tails` can be named so (its tail is not there).
    pub(super) fn find(text: &str, tails: &Tails) -> Option<Name> {
        match pack(text) {
            Some((head, seq, tail)) => Some(Name {
                head,
                seq,
                tail: tails.get(tail)?,
            }),
            None => Some(Name::whole(text)),
        }
    }

    fn whole(text: &str) -> Name {
        Name {
            head: WHOLE,
            seq: 0,
            tail: Arc::new(Tail {
                text: text.into(),
                key: Some(grammar::sort_key(text)),
            }),
        }
    }

    fn is_whole(&self) -> bool {
        self.head == WHOLE
    }

    /// The text, rendered when packed.
    pub(super) fn text(&self) -> Cow<'_, str> {
        if self.is_whole() {
            return Cow::Borrowed(&self.tail.text);
        }
        let prio = (self.head >> 47) as u16;
        let [p0, p1] = prio.to_be_bytes();
        let d = self.head & ((1 << 47) - 1);
        let (date, time) = (d / 1_000_000, d % 1_000_000);
        let width = (MAX_WIDTH - (self.seq & 0xF)) as usize;
        Cow::Owned(format!(
            "{}{}_{date:08}T{time:06}Z_{:0width$}{}",
            p0 as char,
            p1 as char,
            self.seq >> 4,
            self.tail.text
        ))
    }

    fn sort_key(&self) -> SortKey {
        match self.tail.key {
            Some(k) => k,
            None => grammar::sort_key(&self.text()),
        }
    }
}

/// The packed parts of `text` (head, seq, tail), when it is a name the
/// daemon builds; checked to render back to `text`.
fn pack(text: &str) -> Option<(u64, u64, &str)> {
    let f = FileName::parse(text)?;
    // A collision prefix was stripped: kept whole.
    if f.priority.as_ptr() != text.as_ptr() {
        return None;
    }
    let b = text.as_bytes();
    // `NN_` then the IDTS: 8 digits, `T`, 6 digits, `Z`, then `_`.
    let idts = b.get(3..19)?;
    let digits = |r: std::ops::Range<usize>| idts[r].iter().all(u8::is_ascii_digit);
    if !(digits(0..8) && idts[8] == b'T' && digits(9..15) && idts[15] == b'Z' && b[19] == b'_') {
        return None;
    }
    let number = |r: std::ops::Range<usize>| {
        idts[r]
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'))
    };
    let d = number(0..8) * 1_000_000 + number(9..15);
    let head = u64::from(u16::from_be_bytes([b[0], b[1]])) << 47 | d;
    let rest = &text[20..];
    let width = rest.bytes().take_while(u8::is_ascii_digit).count();
    if !(6..=MAX_WIDTH as usize).contains(&width) {
        return None;
    }
    let seq: u64 = rest[..width].parse().ok()?;
    let packed = (head, seq << 4 | (MAX_WIDTH - width as u64), &rest[width..]);
    debug_assert!(head != WHOLE);
    Some(packed)
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Name {}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Self) -> Ordering {
        if !self.is_whole() && !other.is_whole() {
            // Packed alike: equal heads and numbers mean equal text up to
            // the tails.
            return (self.head, self.seq, &*self.tail.text).cmp(&(
                other.head,
                other.seq,
                &*other.tail.text,
            ));
        }
        (self.sort_key(), self.text()).cmp(&(other.sort_key(), other.text()))
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text())
    }
}

/// A folder's tails, each held once. Tails no item holds any more are
/// dropped whenever the set has doubled since the last such sweep, so the
/// set stays within twice the tails in use (plus a few).
#[derive(Default)]
pub(super) struct Tails {
    set: HashSet<Interned>,
    kept: usize,
}

impl Tails {
    fn get(&self, text: &str) -> Option<Arc<Tail>> {
        self.set.get(text).map(|t| t.0.clone())
    }

    fn get_or_add(&mut self, text: &str) -> Arc<Tail> {
        if let Some(t) = self.get(text) {
            return t;
        }
        if self.set.len() >= 2 * self.kept + 64 {
            self.set.retain(|t| Arc::strong_count(&t.0) > 1);
            self.kept = self.set.len();
        }
        let t = Arc::new(Tail {
            text: text.into(),
            key: None,
        });
        self.set.insert(Interned(t.clone()));
        t
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.set.len()
    }
}

/// A tail in [`Tails`], found by its text.
struct Interned(Arc<Tail>);

impl Borrow<str> for Interned {
    fn borrow(&self) -> &str {
        &self.0.text
    }
}

impl PartialEq for Interned {
    fn eq(&self, other: &Self) -> bool {
        self.0.text == other.0.text
    }
}

impl Eq for Interned {}

impl Hash for Interned {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.text.hash(state)
    }
}
