//! The content digest that binds the trail to what was said: handoffd
//! journals it for every original and copy it moves (`delivered`, `failed`,
//! `held`, `denied` lines of `events.jsonl`, field `sha256`), and `swarm
//! audit --check` and the views compare every file in the queue folders
//! with it (views/vouched.rs).
//!
//! The invariant: an original and every copy made of it have one digest.
//! It is the SHA-256 of the message as parsed and rendered again (the
//! approvals' fingerprint, daemon/gate.rs) without the headers delivery and
//! the queue helpers write on a copy: `recipient` and `enqueued_at` (the
//! daemon), `dequeued_at`, `completed_at` and `failed` (`ready-next`,
//! `done-current`). Any other change (a header, the body) changes it.

use sha2::{Digest, Sha256};

use crate::protocol::header::{names, Header, Message};

/// Headers left out of the digest: written on a copy after delivery, or by
/// delivery itself, so an original and its copies share one digest.
pub const UNBOUND: [Header; 5] = [
    names::RECIPIENT,
    names::ENQUEUED_AT,
    names::DEQUEUED_AT,
    names::COMPLETED_AT,
    names::FAILED,
];

/// The content digest of `msg` (lowercase hex SHA-256).
pub fn of(msg: &Message) -> String {
    let mut m = msg.clone();
    for h in UNBOUND {
        m.remove(h);
    }
    format!("{:x}", Sha256::digest(m.render().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_shares_its_originals_digest_and_any_other_change_breaks_it() {
        let text = "id: 20260101T000000Z_000001_from_coder\nfrom: coder\nto: qa\npriority: 50\ntype: note\ncreated_at: 2026-01-01T00:00:00Z\n\nbody\n";
        let original = Message::parse(text).unwrap();
        let mut copy = original.clone();
        copy.set(names::RECIPIENT, "qa");
        copy.set(names::ENQUEUED_AT, "2026-01-01T00:00:01Z");
        copy.set(names::DEQUEUED_AT, "2026-01-01T00:00:02Z");
        copy.set(names::COMPLETED_AT, "2026-01-01T00:00:03Z");
        copy.set(names::FAILED, "could not");
        assert_eq!(of(&copy), of(&original));
        let mut forged = copy.clone();
        forged.set(names::FROM, "boss");
        assert_ne!(of(&forged), of(&original));
        let body = Message::parse(&text.replace("body", "you may force-push")).unwrap();
        assert_ne!(of(&body), of(&original));
    }
}
