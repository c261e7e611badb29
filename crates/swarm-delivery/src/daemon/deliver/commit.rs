//! Group commit: publishing the copies of a group of files, one fsync per
//! destination folder for the group, then the originals to `sent/`; and
//! refusing a file to `failed/`.

use super::*;

/// Most files committed as one group: their copies share each folder's
/// fsync. Bounds how long the first file of a group waits for the others'
/// file fsyncs (~64 ms on a slow disk) while making the 3 folder fsyncs a
/// few percent of a copy's cost.
pub(super) const GROUP: usize = 64;

/// One file whose copies are published, waiting for its group's fsyncs.
pub(super) struct Staged {
    c: Candidate,
    msg: Message,
    /// Positions in `Group::dirs` of every folder holding one of its copies.
    dirs: Vec<usize>,
    wakes: Vec<wake::Request>,
}

#[derive(Default)]
pub(super) struct Group {
    pub(super) staged: Vec<Staged>,
    /// Destination folders to fsync, each once.
    dirs: Vec<PathBuf>,
    at: HashMap<PathBuf, usize>,
}

impl Group {
    pub(super) fn dir(&mut self, d: PathBuf) -> usize {
        if let Some(&i) = self.at.get(&d) {
            return i;
        }
        self.dirs.push(d.clone());
        self.at.insert(d, self.dirs.len() - 1);
        self.dirs.len() - 1
    }
}

/// A message the forum keeps state about (a discussion turn, a session's
/// digest or request): delivered alone, after every earlier file.
pub(super) fn forum_bound(msg: &Message) -> bool {
    msg.discussion().is_some()
        || msg.session().is_some()
        || matches!(
            msg.kind(),
            Some(grammar::MessageType::Digest | grammar::MessageType::DigestRequest)
        )
}

pub(super) fn parent_of(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new("."))
}

impl Deliverer {
    /// Publishes every copy of one admitted file (each copy fsynced, its
    /// folder not yet: that is the group's) and adds it to the group.
    pub(super) fn stage(
        &mut self,
        c: Candidate,
        msg: Message,
        recipients: Vec<Role>,
        group: &mut Group,
    ) -> Result<(), (Candidate, Outcome)> {
        let thorough = self.held.thorough(&c);
        // A relayed copy keeps the stamp of the host that enqueued it.
        let relayed = self.relay.recipient(&c).is_some();
        let enqueued_at = clock::iso_now();
        let wake_method = wake::method(&self.project, &self.config);
        let mut dirs = Vec::with_capacity(recipients.len());
        let mut wakes = Vec::new();
        for role in &recipients {
            let wt = Worktree::new(&role.worktree_path);
            if let Some(link) = wt.symlinked_inbox_folder() {
                let reason = crate::protocol::layout::symlinked_inbox_reason(&link);
                return Err((c, Outcome::Deferred(reason)));
            }
            if let Err(e) = fsx::ensure_dirs(&wt.inbox_dirs()) {
                let reason = format!("{}: {e}", wt.inbox().display());
                return Err((c, Outcome::Deferred(reason)));
            }
            let new = wt.inbox_new();
            if self.held.holds(&wt, &c.name, thorough) {
                // Held already, perhaps by a copy whose folder fsync failed
                // earlier: the group's fsync of `new/` makes it durable.
                dirs.push(group.dir(new));
                continue;
            }
            let mut copy = msg.clone();
            copy.set(names::RECIPIENT, &role.name);
            if !relayed {
                copy.set(names::ENQUEUED_AT, &enqueued_at);
            }
            let dest = new.join(&c.name);
            match fsx::publish_without_dir_sync(&wt.inbox_tmp(), &dest, copy.render().as_bytes()) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    dirs.push(group.dir(new));
                    continue;
                }
                Err(e) => {
                    // Copies already out wait in `new/`; the retry finds them.
                    let reason = format!("{}: {e}", dest.display());
                    return Err((c, Outcome::Deferred(reason)));
                }
            }
            dirs.push(group.dir(new));
            if role.wakes_here() && fields::wakes(&msg, &role.name) {
                wakes.push(wake::Request {
                    role: role.name.clone(),
                    session: role.session.clone(),
                    worktree: role.worktree_path.clone(),
                    path: dest,
                    method: wake_method.clone(),
                    rewake: false,
                });
            }
        }
        group.staged.push(Staged {
            c,
            msg,
            dirs,
            wakes,
        });
        Ok(())
    }

    /// Commits a group: fsyncs each destination folder once; an original
    /// whose copies' folders all synced moves to `sent/`; then each `sent/`
    /// and outbox folder is fsynced once and the deliveries are logged, in
    /// order.
    pub(super) fn commit(&mut self, group: Group, report: &mut PassReport) {
        if group.staged.is_empty() {
            return;
        }
        let failed: Vec<Option<String>> = group
            .dirs
            .iter()
            .map(|d| {
                fsx::sync_dir(d)
                    .err()
                    .map(|e| format!("{}: {e}", d.display()))
            })
            .collect();
        let mut moved: Vec<(Staged, PathBuf)> = Vec::with_capacity(group.staged.len());
        for s in group.staged {
            // Not durable: the original stays and is retried (its copies are
            // found held then, and their folder synced again).
            if let Some(reason) = s.dirs.iter().find_map(|&i| failed[i].clone()) {
                self.settle(&s.c, Outcome::Deferred(reason), report);
                continue;
            }
            // What a feature records of a message (a seat request) is
            // durable before the message counts as sent.
            if let Err(why) = self.feature_duty(|f, d| f.before_sent(d, &s.msg)) {
                self.settle(&s.c, Outcome::Deferred(why.to_string()), report);
                continue;
            }
            for w in &s.wakes {
                self.waker.wake(w.clone());
            }
            let sent = Worktree::new(&s.c.worktree).sent();
            let names = grammar::collision_names(&s.c.path);
            match fsx::move_into_unique_without_sync(&s.c.path, &sent, names) {
                Ok(p) => moved.push((s, p)),
                // Someone else moved the original away (by hand, or a
                // daemon that got past the lock): not a fault of ours.
                Err(e) if e.kind() == io::ErrorKind::NotFound && !s.c.path.exists() => {
                    self.settle(&s.c, Outcome::Vanished, report)
                }
                Err(e) => {
                    let reason = format!("{}: {e}", sent.display());
                    self.settle(&s.c, Outcome::Deferred(reason), report)
                }
            }
        }
        let mut synced: HashSet<PathBuf> = HashSet::new();
        for (s, target) in &moved {
            for d in [parent_of(target), parent_of(&s.c.path)] {
                if synced.insert(d.to_path_buf()) {
                    // Moved; only the fsync of a folder after the rename
                    // failed. Every copy is out and the original left the
                    // outbox: delivered (a crash undoing the rename brings
                    // back an original whose copies are held).
                    if let Err(e) = fsx::sync_dir(d) {
                        eprintln!(
                            "handoffd: moved to {}, but the folder fsync failed: {e}",
                            target.display()
                        );
                    }
                }
            }
        }
        for (s, sent_path) in moved {
            self.relay.sent(&s.c, &s.msg);
            self.feature_duty(|f, d| f.delivered(d, &s.msg, &sent_path));
            // forum.log first: once `delivered` is logged, everything is written.
            self.journal
                .forum(&crate::protocol::line::forum_line(&s.msg));
            self.journal
                .record(&Event::new(Kind::Delivered).moved(&s.msg).path(&s.c.path));
            self.feature_duty(|f, d| f.after_delivered(d, &s.msg));
            self.derived.note(&self.roles, &s.msg);
            self.settle(&s.c, Outcome::Delivered, report);
        }
    }

    /// Moves a refused original to the sender's `failed/`, with the reason in
    /// `<name>.error` beside it, and logs `failed <path> <reason>`.
    pub(super) fn fail(&mut self, c: &Candidate, reason: &str) {
        let wt = Worktree::new(&c.worktree);
        let mut ev = Event::new(Kind::Failed).path(&c.path).reason(reason);
        if let Ok(bytes) = fsx::read_bounded(&c.path, self.config.limits.max_file_bytes) {
            if let Ok(m) = Message::parse_bytes(&bytes) {
                ev = ev.moved(&m);
            }
        }
        let moved = fsx::move_into_unique(&c.path, &wt.failed(), grammar::collision_names(&c.path));
        if matches!(&moved, Err(e) if e.kind() == io::ErrorKind::NotFound && !c.path.exists()) {
            return; // moved away by someone else meanwhile
        }
        let moved = match moved {
            Err(e) if fsx::moved_to(&e).is_some() => {
                eprintln!("handoffd: {e}");
                Ok(fsx::moved_to(&e).unwrap_or(&c.path).to_path_buf())
            }
            other => other,
        };
        match moved {
            Ok(target) => {
                self.journal.record(&ev);
                let mut note = target.into_os_string();
                note.push(".error");
                let note = PathBuf::from(note);
                let text = format!("{}\n", crate::text::escape(reason));
                // A file planted in a fresh outbox may have no tmp/ beside it.
                let written = fsx::ensure_dirs(&[wt.outbox_tmp()])
                    .and_then(|_| fsx::publish(&wt.outbox_tmp(), &note, text.as_bytes()));
                if let Err(e) = written {
                    eprintln!("handoffd: cannot write {}: {e}", note.display());
                }
            }
            Err(e) => {
                // Could not move it: it stays in the outbox and is retried.
                self.held.suspect(&c.path);
                self.journal.record(
                    &Event::new(Kind::Deferred)
                        .path(&c.path)
                        .reason(format!("cannot move to {}: {e}", wt.failed().display())),
                );
            }
        }
    }
}
