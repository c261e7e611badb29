//! Copies that arrived over the bridge, delivered by this daemon like any
//! other file (docs/bridge.md, "One deliverer").
//!
//! The receiving bridge does not write into inboxes: it spools each copy it
//! receives for local role `R` into the outbox of a worktree-shaped folder,
//! `.swarmforge/bridge/in/<R>/` ([`Project::bridge_relay`]), and acks once
//! that publish is durable. The pass lists those outboxes beside the roles'
//! own, so a relayed copy meets the same gate as a local file: the refusals
//! (here: the relay's own, since its sender works on another host), the
//! receiving host's `allowed_types`, `max_hops` and validation rules,
//! `swarm pause`, `approval: required` (held in the relay folder's `pending_approval/`,
//! released by `swarm approve` like any held file), the forum's admission,
//! and group commit. The daemon stays the only writer of every `inbox/new`.
//!
//! Invariant kept here: **one delivery per message id and recipient.** A
//! relayed copy's name is not a function of its id (the `_to_` tail is the
//! sending host's), so a publisher could send one id under several names.
//! The relay folder's `sent/` keeps the name of every relayed copy; the ids
//! in it are read once per daemon and kept up to date as copies are sent. A
//! second copy of an id under its own name is a redelivery (moved to `sent/`
//! beside the first, nothing delivered); under another name it is refused.

use super::checks::Refused;
use super::*;

/// Every served relay folder, one per local role, when a bridge is
/// configured (none otherwise, so a swarm without a bridge lists nothing
/// more).
pub(super) fn relay_worktrees(project: &Project, roles: &Roles, config: &Config) -> Vec<PathBuf> {
    if config.bridge.is_none() {
        return Vec::new();
    }
    roles
        .roles
        .iter()
        .filter(|r| !r.is_remote())
        .map(|r| project.bridge_relay(&r.name))
        .collect()
}

/// The ids already relayed to one recipient, by id → the name they came as.
#[derive(Default)]
pub(super) struct Ledger {
    ids: HashMap<String, String>,
}

impl Ledger {
    fn load(wt: &Worktree) -> Ledger {
        let mut ids = HashMap::new();
        for name in checks::entry_names(&wt.sent()) {
            let plain = grammar::strip_collision_prefix(&name);
            if let Some(f) = grammar::FileName::parse(plain) {
                ids.entry(f.id.to_string())
                    .or_insert_with(|| plain.to_string());
            }
        }
        Ledger { ids }
    }
}

/// What the ledger says of a relayed copy.
pub(super) enum Seen {
    New,
    /// The same copy again (the bridge got it twice).
    Again,
    /// The same id under another name.
    Conflict(String),
}

/// Where the relay folders live and what went through each.
#[derive(Default)]
pub(super) struct Relay {
    /// The canonical folder holding the relay folders, when a bridge is
    /// configured.
    base: Option<PathBuf>,
    /// Per relay folder, the ids relayed through it (loaded on first use).
    ledgers: HashMap<PathBuf, Ledger>,
}

impl Relay {
    /// The local role a candidate was relayed to, when it sits in a relay
    /// folder.
    pub(super) fn recipient(&self, c: &Candidate) -> Option<String> {
        let base = self.base.as_ref()?;
        if c.worktree.parent() != Some(base.as_path()) {
            return None;
        }
        Some(c.worktree.file_name()?.to_string_lossy().into_owned())
    }

    /// Re-reads where relay folders live (a bridge configured or not), and
    /// makes the relay outboxes among `served` now, so the watcher sees the
    /// first copy spooled into each.
    pub(super) fn refresh(
        &mut self,
        project: &Project,
        config: &Config,
        served: &[(PathBuf, PathBuf)],
    ) {
        self.base = None;
        if config.bridge.is_none() {
            return;
        }
        let dir = project.bridge_relay_dir();
        if let Err(e) = fsx::ensure_dirs(&[&dir]) {
            eprintln!("handoffd: cannot create {}: {e}", dir.display());
            return;
        }
        self.base = dir.canonicalize().ok();
        for (wt, outbox) in served {
            if wt.parent() == Some(dir.as_path()) {
                if let Err(e) = fsx::ensure_dirs(&[outbox]) {
                    eprintln!("handoffd: cannot create {}: {e}", outbox.display());
                }
            }
        }
    }

    /// Whether this id was relayed to this relay folder's role before.
    pub(super) fn before(&mut self, c: &Candidate, id: &str) -> Seen {
        let ledger = self
            .ledgers
            .entry(c.worktree.clone())
            .or_insert_with(|| Ledger::load(&Worktree::new(&c.worktree)));
        match ledger.ids.get(id) {
            None => Seen::New,
            Some(n) if *n == c.name => Seen::Again,
            Some(n) => Seen::Conflict(n.clone()),
        }
    }

    /// A relayed copy went out: its id is taken for good.
    pub(super) fn sent(&mut self, c: &Candidate, msg: &Message) {
        if let (Some(ledger), Some(id)) = (self.ledgers.get_mut(&c.worktree), msg.id()) {
            ledger
                .ids
                .entry(id.to_string())
                .or_insert_with(|| c.name.clone());
        }
    }
}

/// A copy received again after it went out: it joins the first in
/// `sent/`, and nothing is delivered.
pub(super) fn again(c: &Candidate) -> Outcome {
    let sent = Worktree::new(&c.worktree).sent();
    match fsx::move_into_unique(&c.path, &sent, grammar::collision_names(&c.path)) {
        Ok(_) => Outcome::Vanished,
        Err(e) if fsx::moved_to(&e).is_some() => Outcome::Vanished,
        Err(e) if e.kind() == io::ErrorKind::NotFound && !c.path.exists() => Outcome::Vanished,
        Err(e) => Outcome::Deferred(format!("{}: {e}", sent.display())),
    }
}

impl Deliverer {
    /// The refusals for a relayed copy, before anything is written. Its
    /// sender works on another host (whose daemon checked the outbox it
    /// came from), so ownership is that host's; what holds here is that it
    /// is a copy, for this recipient, from a role of another host, within
    /// this host's rules.
    pub(super) fn check_relayed(
        &self,
        msg: &Message,
        c: &Candidate,
        recipient: &str,
    ) -> Result<Vec<Role>, Refused> {
        checks::required(msg)?;
        for h in [Header::DequeuedAt, Header::CompletedAt] {
            if msg.get(h).is_some() {
                return Err(Refused(format!("forged {h} header")));
            }
        }
        if msg.recipient() != Some(recipient) {
            return Err(Refused(format!(
                "its recipient header is not {recipient}, the role it was relayed to"
            )));
        }
        if msg.get(names::ENQUEUED_AT).is_none_or(fields::blank) {
            return Err(Refused::from(
                "missing enqueued_at header (the sending host stamps it)",
            ));
        }
        let from = msg.sender().unwrap_or_default();
        match self.roles.find(from) {
            Some(r) if r.is_remote() => {}
            Some(_) => {
                return Err(Refused(format!(
                    "its sender {from} works on this host, so it cannot come over the bridge"
                )))
            }
            None => {
                return Err(Refused(format!(
                    "its sender '{}' is not a role of another host in {}",
                    crate::text::escape(from),
                    self.project.roles_tsv().display()
                )))
            }
        }
        checks::identity(msg, c, from)?;
        let role = match self.roles.find(recipient) {
            Some(r) if !r.is_remote() => r.clone(),
            _ => return Err(Refused(format!("{recipient} is not a role of this host"))),
        };
        let to = msg.to().unwrap_or_default();
        if !grammar::addressed(to, from, recipient)
            && !grammar::in_cc(msg.get(names::CC), recipient)
        {
            return Err(Refused(format!("it is not addressed to {recipient}")));
        }
        self.sender_rules(msg, from)?;
        Ok(vec![role])
    }
}
