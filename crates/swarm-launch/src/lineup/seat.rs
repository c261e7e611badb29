//! `seat_request`: a coordinator agent asks for a seat by message
//! (docs/lineups.md, "Seats asked for by message"). The daemon refuses it,
//! before any copy is written, from a role `lineup.may_change` does not
//! name; a request it delivers it carries out with `swarm role add/remove`
//! in a process of its own (so the daemon keeps delivering while the change
//! waits on it), journals the outcome (`seat_requested`) and tells the
//! requester in a `note` from `handoffd`, `in_reply_to` the request.
//!
//! The invariant, kept by the files in `.swarmforge/daemon/seats/` (a
//! `protocol::ledger`, whose crash test covers each step): a
//! request whose copies are written is carried out and answered exactly
//! once, whatever is killed when.
//! - `<id>.request` is published before the original moves to `sent/`
//!   (after its copies are durable), so a delivered request always has one;
//!   the daemon's start takes up every one left.
//! - `<id>.started` is published before the command runs: for a request
//!   found started but unanswered after a crash, the lineup, read under its
//!   lock, says whether the change happened; if it did, the command is not
//!   run again (a second `role add` would be refused as "already in the
//!   lineup"), else it is.
//! - `<id>.note` is the whole answer, id and all, published before it is
//!   put in the requester's outbox: put there again after a crash, it has
//!   the same name, and the daemon delivers a name it sent before once.
//! - Then `done/<id>` is published and the three files go: a request
//!   whose original had not yet moved to `sent/` when the daemon was
//!   killed is delivered again at the restart, and found done.
//!
//! One worker per request at a time: `<id>.lock`, an OS lock, which the
//! `swarm role` command holds too (as its stdin): a restarted daemon waits
//! for a command a killed one left running before it reads the lineup.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::daemon::feature::{Duties, Feature};
use crate::daemon::journal::{Event, Journal, Kind};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::config::Config;
use crate::protocol::grammar::{self, MessageType};
use crate::protocol::header::{names, Message};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::ledger::{Ledger, Spec, Start};
use crate::protocol::roles::Roles;
use crate::protocol::store;

/// Longest outcome line put in the answer.
const MAX_OUTCOME: usize = 300;

/// Seat requests as a feature of handoffd (`daemon::feature`), registered
/// by `cli::handoffd`: each hook keeps one step of the invariant above.
pub struct SeatRequests;

impl Feature for SeatRequests {
    /// Requests a killed daemon delivered but did not answer.
    fn resume(&mut self, duties: &Duties) {
        resume(duties.project, duties.journal);
    }

    fn refuse(&mut self, duties: &Duties, msg: &Message) -> Option<String> {
        refusal(duties.config, msg)
    }

    /// A seat request is recorded before it counts as sent.
    fn before_sent(&mut self, duties: &Duties, msg: &Message) -> crate::error::Result<()> {
        queue(duties.project, msg).map_err(|e| crate::error::Error::io(dir(duties.project), e))
    }

    fn after_delivered(&mut self, duties: &Duties, msg: &Message) {
        act(duties.project, duties.journal, msg);
    }
}

/// Why the daemon refuses `msg` (None: not a seat request, or allowed).
fn refusal(config: &Config, msg: &Message) -> Option<String> {
    if msg.kind() != Some(MessageType::SeatRequest) {
        return None;
    }
    let from = msg.sender().unwrap_or_default();
    if config.lineup.may_change.iter().any(|r| r == from) {
        return None;
    }
    Some(format!(
        "seat_request: role {from} may not change the lineup (swarm.yaml `lineup: {{may_change: [...]}}` names the roles that may)"
    ))
}

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Ask {
    Add {
        role: String,
        definition: String,
    },
    Remove {
        role: String,
        reason: Option<String>,
    },
}

impl Ask {
    fn of(msg: &Message) -> Option<Ask> {
        let role = msg.get(names::SEAT_ROLE)?.to_string();
        match msg.get(names::SEAT)? {
            "add" => Some(Ask::Add {
                role,
                definition: msg.get(names::DEFINITION)?.to_string(),
            }),
            "remove" => Some(Ask::Remove {
                role,
                reason: msg.get(names::REASON).map(str::to_string),
            }),
            _ => None,
        }
    }

    /// The `swarm role` arguments.
    fn arguments(&self) -> Vec<String> {
        match self {
            Ask::Add { role, definition } => vec![
                "role".into(),
                "add".into(),
                role.clone(),
                "--from".into(),
                definition.clone(),
            ],
            Ask::Remove { role, reason } => {
                let mut v = vec!["role".into(), "remove".into(), role.clone()];
                if let Some(r) = reason {
                    v.extend(["--reason".to_string(), r.clone()]);
                }
                v
            }
        }
    }

    /// Whether the lineup already shows the change (read under its lock).
    fn carried_out(&self, project: &Project) -> bool {
        let Ok(_lock) = crate::lineup::state::lock(project) else {
            return false;
        };
        let Ok(config) = Config::load(&project.config_file()) else {
            return false;
        };
        match self {
            Ask::Add { role, .. } => config.roles.iter().any(|r| &r.name == role),
            Ask::Remove { role, .. } => config.seats.retired(role).is_some(),
        }
    }
}

/// The folder of requests being carried out.
fn dir(project: &Project) -> PathBuf {
    project.daemon_dir().join("seats")
}

/// The files of one request, as named since seat requests began.
static SEATS: Spec = Spec {
    request: ".request",
    started: Some(".started"),
    answer: Some(".note"),
    companions: &[],
    done: Some("done"),
    lock: Some(".lock"),
    valid_id: grammar::valid_message_id,
};

fn ledger(project: &Project) -> Ledger {
    Ledger::new(dir(project), &SEATS)
}

/// Records a seat request whose copies are durable, before its original
/// moves to `sent/` (see the invariant above). Other messages: nothing.
fn queue(project: &Project, msg: &Message) -> std::io::Result<()> {
    match request_id(msg) {
        Some(id) => ledger(project)
            .publish(id, msg.render().as_bytes())
            .map(|_| ()),
        None => Ok(()),
    }
}

fn request_id(msg: &Message) -> Option<&str> {
    (msg.kind() == Some(MessageType::SeatRequest))
        .then(|| msg.id())
        .flatten()
        .filter(|id| grammar::valid_message_id(id))
}

/// Carries out a delivered seat request (none other is acted on), on a
/// thread of its own.
fn act(project: &Project, journal: &Journal, msg: &Message) {
    if let Some(id) = request_id(msg) {
        spawn(project, journal, id.to_string());
    }
}

/// Takes up every request a killed daemon left (called at its start), and
/// clears what a retire it was killed in left beside a request gone.
fn resume(project: &Project, journal: &Journal) {
    let ledger = ledger(project);
    for id in ledger.pending() {
        spawn(project, journal, id);
    }
    if let Err(e) = ledger.sweep() {
        eprintln!("handoffd: {}: {e}", dir(project).display());
    }
}

fn spawn(project: &Project, journal: &Journal, id: String) {
    let project = project.clone();
    let journal = journal.clone();
    std::thread::spawn(move || {
        if let Err(e) = carry_out(&project, &journal, &id) {
            eprintln!("handoffd: seat request {id}: {e} (taken up again at the next start)");
        }
    });
}

fn carry_out(project: &Project, journal: &Journal, id: &str) -> std::io::Result<()> {
    let ledger = ledger(project);
    let lock = ledger.lock(id)?;
    let max = crate::protocol::config::MAX_CONFIG_BYTES;
    let bytes = match ledger.read_request(id, max) {
        Ok(Some(b)) => b,
        // Answered by another worker meanwhile.
        Ok(None) => return Ok(()),
        Err(e) => return Err(std::io::Error::other(e.to_string())),
    };
    let Ok(msg) = Message::parse_bytes(&bytes) else {
        return ledger.retire(id);
    };
    let kept = ledger
        .answer(id, max)
        .and_then(|b| Message::parse_bytes(&b).ok());
    let outcome = match kept {
        Some(_) => None,
        None => {
            let o = outcome(project, &ledger, id, &msg, &lock)?;
            journal.record(
                &Event::new(Kind::SeatRequested)
                    .message(&msg)
                    .reason(o.clone()),
            );
            Some(o)
        }
    };
    // Looked up after the command: it may have removed the requester.
    let from = msg.sender().unwrap_or_default();
    let wt = requester(project, from)?;
    let note = match (kept, outcome) {
        (Some(n), _) => n,
        (None, o) => {
            let make = || {
                Ok(answer(project, &msg, &o.unwrap_or_default())?
                    .render()
                    .into())
            };
            let bytes = ledger.answer_once(id, max, make)?;
            Message::parse_bytes(&bytes).map_err(|e| std::io::Error::other(e.to_string()))?
        }
    };
    tell(&wt, &note)?;
    ledger.retire(id)
}

/// Runs the command once; after a crash mid-run, reads the lineup instead.
fn outcome(
    project: &Project,
    ledger: &Ledger,
    id: &str,
    msg: &Message,
    lock: &fsx::Lock,
) -> std::io::Result<String> {
    let Some(ask) = Ask::of(msg) else {
        return Ok("malformed seat_request (needs seat: add|remove, seat_role, and definition for add); nothing done".into());
    };
    let what = format!("swarm {}", ask.arguments().join(" "));
    // Started by a killed daemon (the lock said it is over): done, or it
    // never ran or was stopped, and running it again is safe (a change
    // made twice is refused, not repeated).
    if ledger.start(id)? == Start::Again && ask.carried_out(project) {
        return Ok(format!("{what}: done (before the daemon restarted)"));
    }
    let swarm = match crate::launch::shims::own_bin_dir() {
        Ok(d) => d.join("swarm"),
        Err(e) => return Ok(format!("{what}: cannot find swarm: {e}")),
    };
    let out = project.daemon_dir().join(format!("seat-{id}.out"));
    let held = lock.share()?;
    Ok(format!(
        "{what}: {}",
        run(&swarm, &project.root, &ask.arguments(), &out, held)
    ))
}

/// The note that tells the requester, with an id of its own.
fn answer(project: &Project, msg: &Message, outcome: &str) -> std::io::Result<Message> {
    let from = msg.sender().unwrap_or_default();
    let (id, _, now) =
        store::take_daemon_id(project).map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut m = Message::default();
    m.set(names::ID, id);
    m.set(names::FROM, grammar::DAEMON);
    m.set(names::TO, from);
    m.set(names::PRIORITY, msg.priority().unwrap_or("50"));
    m.set(names::TYPE, MessageType::Note.name());
    m.set(names::IN_REPLY_TO, msg.id().unwrap_or_default());
    m.set(names::CREATED_AT, clock::iso(now));
    let escaped = crate::text::escape(outcome);
    let mut line: String = escaped.chars().take(MAX_OUTCOME).collect();
    if escaped.chars().count() > MAX_OUTCOME {
        line.push('…');
    }
    m.set(names::MESSAGE, line);
    Ok(m)
}

/// The requester's worktree (roles.tsv, the removed roles included).
fn requester(project: &Project, role: &str) -> std::io::Result<Worktree> {
    let roles =
        Roles::load(&project.roles_tsv()).map_err(|e| std::io::Error::other(e.to_string()))?;
    let seats = crate::lineup::state::load(project).unwrap_or_default();
    let roles = crate::lineup::state::with_retired(roles, &seats);
    roles
        .find(role)
        .map(|r| Worktree::new(&r.worktree_path))
        .ok_or_else(|| std::io::Error::other(format!("requester {role} is not in roles.tsv")))
}

/// Puts the answer in the requester's outbox, once: the same name again
/// after a crash is delivered once (the daemon knows what it sent).
fn tell(wt: &Worktree, note: &Message) -> std::io::Result<()> {
    let name = store::outbox_name(note);
    if wt.outbox().join(&name).exists() || wt.sent().join(&name).exists() {
        return Ok(());
    }
    fsx::ensure_dirs(&wt.send_dirs())?;
    store::publish(wt, note)
        .map(|_| ())
        .map_err(|e| std::io::Error::other(e.to_string()))
}

fn run(swarm: &Path, root: &Path, args: &[String], out: &Path, held: std::fs::File) -> String {
    let file = match std::fs::File::create(out) {
        Ok(f) => f,
        Err(e) => return format!("cannot write {}: {e}", out.display()),
    };
    let err = match file.try_clone() {
        Ok(f) => f,
        Err(e) => return format!("cannot write {}: {e}", out.display()),
    };
    let status = Command::new(swarm)
        .args(args)
        .current_dir(root)
        .stdin(Stdio::from(held))
        .stdout(file)
        .stderr(err)
        .status();
    let last = std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .to_string();
    match status {
        Ok(s) if s.success() => format!("done: {last}"),
        Ok(s) => format!("refused (exit {}): {last}", s.code().unwrap_or(-1)),
        Err(e) => format!("cannot run {}: {e}", swarm.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(extra: &str) -> Message {
        Message::parse_bytes(
            format!("id: 20260101T000000Z_000001_from_coord\nfrom: coord\nto: lead\npriority: 50\ntype: seat_request\n{extra}\n")
                .as_bytes(),
        )
        .unwrap()
    }

    /// The files of a seat request, named and filled as before the ledger
    /// (docs/lineups.md): a daemon of either side reads the other's.
    #[test]
    fn a_request_keeps_the_files_seat_requests_always_had() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let msg = request("seat: add\nseat_role: r2\ndefinition: rev\n");
        let id = msg.id().unwrap();
        let seats = p.daemon_dir().join("seats");
        let read = |name: &str| std::fs::read_to_string(seats.join(name)).unwrap();
        queue(&p, &msg).unwrap();
        queue(&p, &msg).unwrap();
        assert_eq!(read(&format!("{id}.request")), msg.render());
        let l = ledger(&p);
        let _lock = l.lock(id).unwrap();
        assert_eq!(l.start(id).unwrap(), Start::First);
        assert_eq!(read(&format!("{id}.started")), "");
        l.answer_once(id, 4096, || Ok(b"note\n".to_vec())).unwrap();
        assert_eq!(read(&format!("{id}.note")), "note\n");
        l.retire(id).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&seats)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, [format!("{id}.lock"), "done".to_string()]);
        assert_eq!(read(&format!("done/{id}")), "");
        // Delivered again after it was answered: not taken again.
        queue(&p, &msg).unwrap();
        assert!(l.pending().is_empty());
    }

    /// A daemon killed in a retire, after the request went: its next start
    /// clears what was left beside it (before the ledger it stayed for good).
    #[test]
    fn a_restart_clears_what_a_retire_killed_midway_left() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        let seats = p.daemon_dir().join("seats");
        let id = "20260101T000000Z_000001_from_coord";
        std::fs::create_dir_all(seats.join("done")).unwrap();
        for name in [
            format!("done/{id}"),
            format!("{id}.started"),
            format!("{id}.note"),
        ] {
            std::fs::write(seats.join(name), "").unwrap();
        }
        resume(&p, &Journal::new(&p));
        assert!(!seats.join(format!("{id}.started")).exists());
        assert!(!seats.join(format!("{id}.note")).exists());
        assert!(seats.join("done").join(id).exists());
    }

    #[test]
    fn a_request_reads_as_what_it_asks() {
        assert_eq!(
            Ask::of(&request("seat: add\nseat_role: r2\ndefinition: rev\n")),
            Some(Ask::Add {
                role: "r2".into(),
                definition: "rev".into()
            })
        );
        assert_eq!(Ask::of(&request("seat: add\nseat_role: r2\n")), None);
        assert_eq!(Ask::of(&request("seat: grow\nseat_role: r2\n")), None);
        assert_eq!(
            Ask::of(&request("seat: remove\nseat_role: r2\nreason: done\n"))
                .unwrap()
                .arguments(),
            ["role", "remove", "r2", "--reason", "done"]
        );
    }
}
