//! Which handoff a headless turn worked on, seen as it happens.
//!
//! The turn's stream reader looks in `inbox/in_process` when it reads a
//! tool call, but it may read behind the agent: a long line to skip, a busy
//! machine, an agent that takes and finishes an item between two events.
//! Then the item is already in `completed/` when the reader looks, and the
//! turn's usage and activity lost their item (seen under CI load with a
//! hostile stream). So, for the turn's length, a watch on `in_process`
//! notes every item moved in, read from where it is by then (still in
//! process, or completed under the same name). Only a plain item is
//! followed; a batch keeps the reader's own look.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::protocol::grammar;
use crate::protocol::header::names;
use crate::protocol::layout::Worktree;
use crate::protocol::trail::{self, Loaded};
use crate::sys::watch::DirWatch;

/// The handoff in process in `wt`: its id and thread (the root's id; a
/// root is its own thread). Read up to the copy limit of `max_file_bytes`
/// (`limits.max_file_bytes`).
pub(crate) fn current_item(wt: &Worktree, max_file_bytes: u64) -> Option<(String, String)> {
    let (_, m) = crate::daemon::watchdog::in_process_message(wt, max_file_bytes)?;
    let id = m.get(names::ID)?.to_string();
    let thread = m.thread().unwrap_or(&id).to_string();
    Some((id, thread))
}

/// The id and thread of a handoff.
pub type Item = (String, String);

/// Watches a worktree's `in_process` until dropped.
pub struct ItemWatch {
    last: Arc<Mutex<Option<Item>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ItemWatch {
    /// Starts watching `wt`; items are read up to `max_bytes`
    /// (`limits.max_file_bytes`).
    pub fn start(wt: &Worktree, max_bytes: u64) -> ItemWatch {
        let last = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s, wt) = (last.clone(), stop.clone(), wt.clone());
        // Armed before the agent starts, so no move into process is missed.
        let mut watch = DirWatch::new(vec![wt.in_process()]);
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Acquire) {
                let wake = watch.wait_for(Duration::from_millis(100));
                for p in wake.paths {
                    if let Some(it) = p.file_name().and_then(|n| item(&wt, n.as_ref(), max_bytes)) {
                        if let Ok(mut g) = l.lock() {
                            *g = Some(it);
                        }
                    }
                }
            }
        });
        ItemWatch {
            last,
            stop,
            thread: Some(thread),
        }
    }

    /// The last item seen moved into process during the turn.
    pub fn last(&self) -> Option<Item> {
        self.last.lock().ok().and_then(|g| g.clone())
    }
}

impl Drop for ItemWatch {
    /// Tells the thread to end and does not wait for it: it holds nothing
    /// but its watch and what it shares with us, and would keep the turn
    /// up to its 100 ms wait longer (every headless turn paid that).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        drop(self.thread.take());
    }
}

/// The item named `name`, in process or already completed.
fn item(wt: &Worktree, name: &Path, max_bytes: u64) -> Option<Item> {
    let name = name.to_str()?;
    if !grammar::valid_handoff_name(name) {
        return None;
    }
    [wt.in_process(), wt.completed()].iter().find_map(|dir| {
        let Loaded::Ok(m) = trail::load_message(&dir.join(name), max_bytes) else {
            return None;
        };
        let id = m.get(names::ID)?.to_string();
        let thread = m.thread().unwrap_or(&id).to_string();
        Some((id, thread))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An item taken and finished before anyone looked is still known.
    #[test]
    fn an_item_taken_and_finished_at_once_is_seen() {
        let d = tempfile::tempdir().unwrap();
        let wt = Worktree::new(d.path());
        for dir in [wt.in_process(), wt.completed()] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let w = ItemWatch::start(&wt, 1 << 20);
        let name = "50_20260615T140531Z_000001_from_coder_to_reviewer.handoff";
        let staged = d.path().join(name);
        std::fs::write(
            &staged,
            "id: msg-abc\nfrom: coder\nto: reviewer\ntype: note\npriority: 50\nthread: msg-root\nmessage: hi\n\nbody\n",
        )
        .unwrap();
        std::fs::rename(&staged, wt.in_process().join(name)).unwrap();
        std::fs::rename(wt.in_process().join(name), wt.completed().join(name)).unwrap();
        let end = std::time::Instant::now() + Duration::from_secs(20);
        while w.last().is_none() && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            w.last(),
            Some(("msg-abc".to_string(), "msg-root".to_string()))
        );
    }
}
