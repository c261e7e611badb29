//! Drafts to send, and files planted the way senders and deliveries publish
//! them (complete or absent: a temp file, then one rename).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{hq, Project, Run};

pub const CREATED: &str = "2026-06-15T14:05:31.123456Z";
pub const PREAMBLE: &str = "Re-read your role and constitution.";

/// A well-formed outbox note (what `swarm-handoff` writes).
pub struct Note {
    pub id: String,
    pub name: String,
    pub text: String,
}

/// A note from `sender` with the id's time stamp `idts` and `created_at` given.
pub fn note_at(sender: &str, idts: &str, seq: u32, to: &str, message: &str, created: &str) -> Note {
    let id = format!("{idts}_{seq:06}_from_{sender}");
    let name = format!("50_{id}_to_{}.handoff", to.replace(',', "_"));
    let text = format!(
        "id: {id}\nfrom: {sender}\nto: {to}\npriority: 50\ntype: note\nmessage: {message}\n\
         created_at: {created}\n\n{PREAMBLE}\n\n{message}\n"
    );
    Note { id, name, text }
}

/// A note sent at [`CREATED`].
pub fn note(sender: &str, seq: u32, to: &str, message: &str) -> Note {
    note_at(sender, "20260615T140531Z", seq, to, message, CREATED)
}

static PUBLISHED: AtomicUsize = AtomicUsize::new(0);

/// Writes `bytes` at `dest` through a temp file in the enclosing
/// `.swarmforge/handoffs/` (outside every queue folder) and one rename, so no
/// reader ever sees it half-written.
pub fn publish(dest: &Path, bytes: &[u8]) -> PathBuf {
    let parent = dest.parent().unwrap();
    fs::create_dir_all(parent).unwrap();
    let base = parent
        .ancestors()
        .find(|a| a.ends_with(".swarmforge/handoffs"))
        .unwrap_or(parent);
    let tmp = base.join(format!(
        ".publish.{}.{}.tmp",
        std::process::id(),
        PUBLISHED.fetch_add(1, Ordering::Relaxed)
    ));
    fs::write(&tmp, bytes).unwrap();
    fs::rename(&tmp, dest).unwrap();
    dest.to_path_buf()
}

/// Publishes `bytes` as `<wt>/.swarmforge/handoffs/outbox/<name>`.
pub fn drop_in_outbox(wt: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    // Senders make outbox/tmp; the daemon writes refusal notes through it.
    fs::create_dir_all(hq(wt, "outbox/tmp")).unwrap();
    publish(&hq(wt, "outbox").join(name), bytes)
}

/// Publishes a note in the outbox of the worktree folder `wt`.
pub fn post(wt: &Path, n: &Note) -> PathBuf {
    drop_in_outbox(wt, &n.name, n.text.as_bytes())
}

impl Project {
    /// Publishes a note in the outbox of worktree `wt` (`master` is the root).
    pub fn post(&self, wt: &str, n: &Note) -> PathBuf {
        post(&self.wt_path(wt), n)
    }

    /// Writes `draft-<role>.txt` in `role`'s worktree; returns its path.
    pub fn draft(&self, role: &str, text: &str) -> PathBuf {
        let path = self.role_dir(role).join(format!("draft-{role}.txt"));
        fs::write(&path, text).unwrap();
        path
    }

    /// Sends a draft with `swarm-handoff` as `role` from its worktree.
    pub fn send_as(&self, role: &str, draft: &str) -> Run {
        let path = self.draft(role, draft);
        self.cmd("swarm-handoff").role(role).arg(path).run()
    }
}
