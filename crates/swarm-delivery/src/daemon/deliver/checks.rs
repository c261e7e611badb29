//! The refusals that happen before any copy is written: reading the file,
//! the header checks (forged, unknown recipient, wrong outbox), roles that
//! went away, and whether a recipient already holds the file ([`Held`]).

use super::*;

/// Headers only the daemon and helpers write; an outbox file carrying one is forged.
pub(super) const DELIVERY_HEADERS: &[Header] = &[
    Header::Recipient,
    Header::EnqueuedAt,
    Header::DequeuedAt,
    Header::CompletedAt,
];

/// Headers every outbox file must carry.
pub(super) const REQUIRED: &[Header] = &[
    Header::Id,
    Header::From,
    Header::To,
    Header::Priority,
    Header::Type,
    Header::CreatedAt,
];

/// Whether a recipient holds a copy already: the half of exactly-once that
/// a restart or a retry depends on.
///
/// Invariant kept here: **a file that may have copies out there gets the
/// thorough check** (every folder of the recipient's inbox and archive, by
/// an index built at most once per pass), so a copy is never written twice;
/// every other file gets the quick one (the places a copy of that name can
/// be). Suspects are the files present when this process started, and those
/// deferred or waiting since (one may have failed mid-delivery).
#[derive(Default)]
pub(super) struct Held {
    /// Outbox files that may already have copies out there.
    suspects: HashSet<PathBuf>,
    /// Per recipient worktree, built at most once per pass (thorough checks
    /// only).
    index: HashMap<PathBuf, InboxIndex>,
}

impl Held {
    /// Files the first pass found: a killed daemon may have copied them.
    pub(super) fn suspect_all(&mut self, paths: impl Iterator<Item = PathBuf>) {
        self.suspects.extend(paths);
    }

    /// A file that stays in its outbox after an attempt.
    pub(super) fn suspect(&mut self, path: &Path) {
        self.suspects.insert(path.to_path_buf());
    }

    /// A file that left its outbox.
    pub(super) fn cleared(&mut self, path: &Path) {
        self.suspects.remove(path);
    }

    /// Whether `c` gets the thorough check: a suspect, or a name its
    /// sender sent before (a re-planted original).
    pub(super) fn thorough(&self, c: &Candidate) -> bool {
        self.suspects.contains(&c.path) || sent_before(&Worktree::new(&c.worktree), &c.name)
    }

    /// After a pass: the indexes go (the inboxes move on), and so do the
    /// suspects that are gone (delivered by hand, removed).
    pub(super) fn end_pass(&mut self) {
        self.suspects.retain(|p| p.exists());
        self.index.clear();
    }

    /// Whether the recipient already holds this file anywhere in its inbox
    /// or its archive. Checked in the direction items move (new →
    /// in_process → completed → archive), so an item moving concurrently is
    /// still seen.
    pub(super) fn holds(&mut self, wt: &Worktree, name: &str, thorough: bool) -> bool {
        let archived = store::archive_day(wt, name).map(|d| d.join("completed"));
        if [wt.inbox_new(), wt.in_process(), wt.completed()]
            .iter()
            .chain(archived.iter())
            .any(|d| d.join(name).exists())
        {
            return true;
        }
        if !thorough {
            return false;
        }
        self.index
            .entry(wt.root.clone())
            .or_insert_with(|| InboxIndex::build(wt))
            .names
            .contains(name)
    }
}

/// Every item name a recipient held when the index was built: everything in
/// `new/` plus everything inside the `batch_*` dirs of `in_process/` and
/// `completed/`. Items only move forward (new → in_process → completed), so a
/// name in `new/` at build time is held for good even after it moved into a
/// batch; and since this daemon is the only writer of `new/`, any copy made
/// before this pass is covered. No timestamps, no locks. `swarm archive`
/// moves completed items on into `archive/<day>/completed/`: those count as
/// held too, or a copy completed and archived would be delivered again.
struct InboxIndex {
    names: HashSet<String>,
}

/// The names of every entry of `dir`, whatever each is (a folder that cannot
/// be listed has none).
pub(super) fn entry_names(dir: &Path) -> impl Iterator<Item = String> {
    store::each(dir).map(|e| e.name)
}

impl InboxIndex {
    fn build(wt: &Worktree) -> InboxIndex {
        let mut names: HashSet<String> = entry_names(&wt.inbox_new()).collect();
        let archived = wt.archive_days().into_iter().map(|d| d.join("completed"));
        for base in [wt.in_process(), wt.completed()]
            .into_iter()
            .chain(archived)
        {
            for b in store::batch_dirs(&base) {
                names.extend(entry_names(&b));
            }
            names.extend(entry_names(&base));
        }
        InboxIndex { names }
    }
}

/// Why a file is refused for good: it goes to `failed/`, journaled
/// `failed` with this reason (never retried, unlike a deferral).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct Refused(pub(super) String);

impl From<&str> for Refused {
    fn from(why: &str) -> Refused {
        Refused(why.to_string())
    }
}

/// Every header an outbox file (or a relayed copy) must carry.
pub(super) fn required(msg: &Message) -> Result<(), Refused> {
    match REQUIRED
        .iter()
        .find(|h| msg.get(**h).is_none_or(fields::blank))
    {
        Some(h) => Err(Refused(format!("missing {h} header"))),
        None => Ok(()),
    }
}

/// The id names its sender, and the file name matches its id and priority.
pub(super) fn identity(msg: &Message, c: &Candidate, from: &str) -> Result<(), Refused> {
    let id = msg.id().unwrap_or_default();
    if !grammar::id_names_sender(id, from) {
        return Err(Refused::from("id does not name the sender"));
    }
    let priority = msg.priority().unwrap_or_default();
    if !grammar::name_matches(&c.name, priority, id) {
        return Err(Refused::from(
            "file name does not match its priority and id headers",
        ));
    }
    Ok(())
}

/// Whether the sender sent a file of this name before (in `sent/`, live or
/// archived): a re-planted original, which gets the thorough check.
fn sent_before(sender: &Worktree, name: &str) -> bool {
    let archived = store::archive_day(sender, name).map(|d| d.join("sent"));
    [sender.sent()]
        .iter()
        .chain(archived.iter())
        .any(|d| d.join(name).exists())
}

impl Deliverer {
    /// This host's rules for what `from` sends: its allowed_types,
    /// max_hops and every validation rule.
    pub(super) fn sender_rules(&self, msg: &Message, from: &str) -> Result<(), Refused> {
        let is_role = |r: &str| r == grammar::ALL || self.roles.find(r).is_some();
        let allowed = self.config.allowed_types(from);
        let policy = rules::Policy {
            is_role: &is_role,
            allowed: &allowed,
        };
        rules::recheck(msg, &policy, self.config.max_hops).map_err(|e| Refused(e.to_string()))
    }

    /// Whether `role` works in the worktree of this outbox (docs/protocol.md §7.2:
    /// the outbox a file sits in, not its `from`, says who sent it), comparing
    /// canonical paths so two spellings of one folder agree.
    pub(super) fn owns(&self, c: &Candidate, role: &str) -> bool {
        let Some(r) = self.roles.find(role) else {
            return false;
        };
        match self.outboxes.canonical(&r.worktree_path) {
            Some(p) => *p == c.worktree,
            // A worktree not resolved yet in this process.
            None => r
                .worktree_path
                .canonicalize()
                .is_ok_and(|p| p == c.worktree),
        }
    }

    pub(super) fn read(&self, c: &Candidate) -> Result<Message, Outcome> {
        if !grammar::valid_handoff_name(&c.name) {
            return Err(Outcome::Failed("invalid file name".into()));
        }
        let limit = self.config.limits.max_file_bytes;
        let bytes = match fsx::read_bounded(&c.path, limit) {
            Ok(b) => b,
            Err(fsx::ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Outcome::Vanished)
            }
            Err(fsx::ReadRefusal::Io(e)) => return Err(Outcome::Deferred(format!("read: {e}"))),
            Err(fsx::ReadRefusal::TooLarge(n)) => {
                return Err(Outcome::Failed(format!(
                    "file too large ({n} bytes; limit {limit})"
                )))
            }
            Err(e) => return Err(Outcome::Failed(e.to_string())),
        };
        Message::parse_bytes(&bytes).map_err(|e| Outcome::Failed(e.to_string()))
    }

    /// A recipient the lineup is removing or removed, or a sender it
    /// removed (docs/lineups.md): refused with the reason, never deferred,
    /// since that role is not coming back on its own.
    pub(super) fn lineup_refusal(&self, msg: &Message) -> Option<String> {
        let seats = &self.config.seats;
        let from = msg.sender().unwrap_or_default();
        if seats.retired(from).is_some() && self.roles.find(from).is_none() {
            return seats.refusal(from).map(|why| format!("sender: {why}"));
        }
        grammar::role_list(msg.to())
            .into_iter()
            .chain(msg.cc())
            .find_map(|r| seats.refusal(r))
            .map(|why| format!("recipient: {why}"))
    }

    /// A sender or recipient that was in roles.tsv earlier in this process's
    /// life and is not now: the reason to defer the file until it is back.
    pub(super) fn role_gone(&self, msg: &Message, c: &Candidate) -> Option<String> {
        let gone = |r: &str| self.known.contains(r) && self.roles.find(r).is_none();
        let from = msg.sender().unwrap_or_default();
        if gone(from) && !self.owns(c, from) {
            return Some(format!("sender {from} is no longer in roles.tsv"));
        }
        grammar::role_list(msg.to())
            .into_iter()
            .chain(msg.cc())
            .find(|r| *r != grammar::ALL && gone(r))
            .map(|r| format!("recipient {r} is no longer in roles.tsv"))
    }

    /// Whether a recipient named by `msg` holds a copy of `c` already: its
    /// delivery began before this process (only a suspect can have begun).
    /// A recipient in the sender's own worktree proves nothing: the sender
    /// could have put that copy there itself.
    fn begun(&mut self, msg: &Message, c: &Candidate) -> bool {
        if !self.held.thorough(c) {
            return false;
        }
        let from = msg.sender().unwrap_or_default();
        let names = self.roles.roles.iter().map(|r| r.name.as_str());
        let named = grammar::recipients(msg.to().unwrap_or_default(), from, names);
        let real = |p: &Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let own = real(&c.worktree);
        let worktrees: Vec<Worktree> = named
            .iter()
            .map(String::as_str)
            .chain(msg.cc())
            .filter_map(|r| self.roles.find(r))
            .filter(|r| real(&r.worktree_path) != own)
            .map(|r| Worktree::new(&r.worktree_path))
            .collect();
        worktrees
            .iter()
            .any(|wt| self.held.holds(wt, &c.name, true))
    }

    /// The refusals that must happen before any copy is written.
    pub(super) fn check(&self, msg: &Message, c: &Candidate) -> Result<Vec<&Role>, Refused> {
        required(msg)?;
        for h in DELIVERY_HEADERS {
            if msg.get(*h).is_some() {
                return Err(Refused(format!("forged {h} header")));
            }
        }
        let from = msg.sender().unwrap_or_default();
        let from_daemon = from == crate::protocol::grammar::DAEMON;
        if from_daemon {
            // Only our own digest requests, queued in the moderator's
            // outbox; our answers to a seat request, each queued in the
            // requester's own outbox for it alone (lineup::seat); and the
            // notes that start a card, queued by `swarm card new` (crates/swarm-records/src/board/).
            let moderator = self.config.forum.moderator.as_deref();
            let digest = msg.kind() == Some(grammar::MessageType::DigestRequest)
                && moderator.is_some_and(|m| self.owns(c, m));
            let to = grammar::role_list(msg.to());
            let seat_answer = msg.kind() == Some(grammar::MessageType::Note)
                && msg.get(names::IN_REPLY_TO).is_some()
                && to.len() == 1
                && self.owns(c, to[0]);
            let card_birth = crate::board::is_birth_in_own_outbox(msg, &|r| self.owns(c, r));
            let ok = digest || seat_answer || card_birth;
            if !ok {
                return Err(Refused::from("sender mismatch"));
            }
        } else if !self.owns(c, from) {
            // The daemon, not an environment variable, decides who sent it
            // (docs/protocol.md §7.2).
            return Err(Refused::from("sender mismatch"));
        }
        identity(msg, c, from)?;
        let to = msg.to().unwrap_or_default();
        // `all` is every role but one leaving the lineup.
        let names = self
            .roles
            .roles
            .iter()
            .map(|r| r.name.as_str())
            .filter(|n| !self.config.seats.is_leaving(n));
        let mut recipients: Vec<&Role> = Vec::new();
        for r in grammar::recipients(to, from, names) {
            match self.roles.find(&r) {
                Some(role) => recipients.push(role),
                None => return Err(Refused(format!("unknown recipient {r}"))),
            }
        }
        if !from_daemon {
            self.sender_rules(msg, from)?;
        }
        for r in msg.cc() {
            // Context copies: delivered like any copy, never woken.
            match self.roles.find(r) {
                Some(role) if !recipients.iter().any(|x| x.name == r) => recipients.push(role),
                Some(_) => {}
                None => return Err(Refused(format!("unknown cc role {r}"))),
            }
        }
        Ok(recipients)
    }

    /// Reads and checks one outbox file: the refusals that happen before any
    /// copy is written.
    pub(super) fn prepare(&mut self, c: &Candidate) -> Result<(Message, Vec<Role>), Outcome> {
        let msg = self.read(c)?;
        // Admitted by a daemon killed mid-delivery: a recipient holds a copy
        // already, so the only outcome that keeps exactly-once is to finish
        // it. A refusal or a hold decided now (the role began leaving, a
        // pause, `approval: required`) would tell the sender it never went
        // while the copy is there.
        let begun = self.begun(&msg, c);
        if let Some(reason) = (!begun)
            .then(|| {
                self.lineup_refusal(&msg)
                    .or_else(|| self.feature_duty(|f, d| f.refuse(d, &msg)))
            })
            .flatten()
        {
            return Err(Outcome::Failed(reason));
        }
        if let Some(reason) = self.role_gone(&msg, c) {
            return Err(Outcome::Deferred(reason));
        }
        let checked = match self.relay.recipient(c) {
            Some(r) => self.check_relayed(&msg, c, &r),
            None => self
                .check(&msg, c)
                .map(|v| v.into_iter().cloned().collect()),
        };
        let recipients: Vec<Role> = match checked {
            Ok(r) => r,
            Err(reason) => return Err(Outcome::Failed(reason.0)),
        };
        if self.relay.recipient(c).is_some() {
            match self.relay.before(c, msg.id().unwrap_or_default()) {
                relay::Seen::New => {}
                relay::Seen::Again => return Err(relay::again(c)),
                relay::Seen::Conflict(first) => {
                    return Err(Outcome::Failed(format!(
                        "duplicate: its id was relayed to this role before, as {first}"
                    )))
                }
            }
        }
        if begun {
            return Ok((msg, recipients));
        }
        // `swarm pause` and `approval: required` (see daemon::gate).
        match gate::decide(&self.project, &self.config, &msg) {
            gate::Decision::Deliver => {}
            gate::Decision::Paused(r) => return Err(Outcome::Waiting(r)),
            gate::Decision::Hold => {
                return Err(
                    match gate::hold(&self.journal, &c.worktree, &c.path, &msg) {
                        Ok(()) => Outcome::Vanished,
                        Err(why) => Outcome::Deferred(why.to_string()),
                    },
                )
            }
        }
        Ok((msg, recipients))
    }
}
