//! Taking the next item of a deep `new/` without listing it, and the
//! answers waiting for an item in process without reading every waiting
//! file: the daemon's order hint (protocol::order). Every name it gives is
//! checked here (a name gone since is skipped, anything but a regular file
//! sends the caller back to the listing, which refuses it as before);
//! without a usable answer the caller lists.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::ready::is_reaction;
use super::{Inbox, Item};
use crate::error::Result;
use crate::protocol::clock;
use crate::protocol::order::{self, Answer, Ask};

/// How long a caller waits for the daemon before listing itself.
const PATIENCE: Duration = Duration::from_secs(1);

/// Questions per call: each answer gives [`order::HEAD`] names; a queue with
/// more reactions than that in front of its next work item is listed.
const ROUNDS: usize = 4;

/// The daemon's answer for `new_dir`, or `None`: a shallow folder (listing
/// it costs no more than asking), no daemon, or anything unexpected.
fn ask(socket: &Path, what: Ask, new_dir: &Path) -> Option<Answer> {
    let meta = std::fs::symlink_metadata(new_dir).ok()?;
    if !meta.is_dir() || meta.len() < order::DEEP_DIR_BYTES {
        return None;
    }
    let q = order::question(what, &new_dir.canonicalize().ok()?)?;
    let mut conn = connect(socket)?;
    conn.set_read_timeout(Some(PATIENCE)).ok()?;
    conn.set_write_timeout(Some(PATIENCE)).ok()?;
    conn.write_all(q.as_bytes()).ok()?;
    let mut text = String::new();
    conn.take(order::MAX_ANSWER as u64)
        .read_to_string(&mut text)
        .ok()?;
    order::parse_answer(&text)
}

/// Connects without waiting: a daemon whose backlog is full (it is stuck)
/// refuses at once instead of holding us, and the inbox lock, indefinitely.
fn connect(socket: &Path) -> Option<UnixStream> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .ok()?;
    rustix::net::connect(&fd, &SocketAddrUnix::new(socket).ok()?).ok()?;
    let conn = UnixStream::from(fd);
    conn.set_nonblocking(false).ok()?;
    Some(conn)
}

impl Inbox<'_> {
    /// The first work item of `new/` (its name and content) by the daemon's
    /// order, completing the reactions in front of it as the listing path
    /// does; `None` when the caller must list instead.
    pub(super) fn hinted_first_work(
        &self,
        reactions: &mut Vec<Item>,
    ) -> Result<Option<(String, Item)>> {
        let Some(socket) = &self.order else {
            return Ok(None);
        };
        let new = self.wt.inbox_new();
        for _ in 0..ROUNDS {
            let Some(a) = ask(socket, Ask::Head, &new) else {
                return Ok(None);
            };
            // Odd entries are refused by the listing path; an empty answer
            // is listed too, so a wrong "nothing" can never starve a queue.
            if a.odd > 0 || a.head.is_empty() {
                return Ok(None);
            }
            for name in a.head {
                let path = new.join(&name);
                match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.file_type().is_file() => {}
                    // Taken or removed since the answer.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    _ => return Ok(None),
                }
                let mut item = self.load(&path)?;
                if !is_reaction(&item) {
                    return Ok(Some((name, item)));
                }
                self.complete_file(&mut item, &clock::iso_now(), None)?;
                reactions.push(item);
            }
        }
        Ok(None)
    }

    /// The names in `new/` that may be answers, in hand-out order, as the
    /// daemon knows them; `None` when the caller must read the folder (no
    /// usable answer, an odd entry, or more names than one answer holds).
    pub(super) fn hinted_answers(&self) -> Option<Vec<String>> {
        let a = ask(self.order.as_ref()?, Ask::Answers, &self.wt.inbox_new())?;
        (a.odd == 0 && a.head.len() == a.items).then_some(a.head)
    }
}
