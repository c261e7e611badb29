//! The receiving side: one message from JetStream, checked as what the
//! transport promises (a copy for a local role, from a role of the host that
//! published it, within the size limit), then spooled into that role's relay
//! folder (`Project::bridge_relay`) the usual way (temp, fsync, no-clobber
//! rename, fsync of the folder). The daemon delivers it from there through
//! its one gate (docs/bridge.md, "One deliverer"), so `swarm pause`,
//! approvals and every rule of this host hold for it. The caller acks only
//! after `Spooled` or `Held`.

use crate::protocol::header::names;
use std::path::PathBuf;

use super::Settings;
use crate::error::Error;
use crate::fsx;
use crate::protocol::commit_id::{CommitId, NotACommitId};
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::Worktree;
use crate::protocol::roles::Roles;
use crate::sys::git;

/// What became of a received message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Durable in the role's relay folder, for the daemon to deliver: ack.
    Spooled(PathBuf),
    /// Spooled or delivered already (a redelivery): ack.
    Held,
    /// Cannot be spooled yet (its commit is missing, the folder is not
    /// writable): leave it unacknowledged and retry.
    Wait(String),
    /// Never deliverable: terminate it, with this reason logged.
    Reject(String),
}

/// What the publishing bridge said of a message, in its NATS headers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sent<'a> {
    /// `Swarm-From-Host`: the publishing host.
    pub from_host: Option<&'a str>,
    /// `Swarm-Name`: the copy's file name.
    pub name: Option<&'a str>,
    /// `Swarm-Approval`: `<fingerprint of the original> <by>`, a person's
    /// approval on the sender's host (docs/bridge.md, "Approvals travel").
    pub approval: Option<&'a str>,
}

/// Checks and spools one message that arrived on `subject`, as `sent`
/// describes it.
pub fn accept(s: &Settings, roles: &Roles, subject: &str, sent: Sent, bytes: &[u8]) -> Verdict {
    match check(s, roles, subject, &sent, bytes) {
        Ok(c) => spool(s, &c, sent.approval, bytes),
        Err(refused) => refused,
    }
}

/// A message that passed [`check`]: for `role` of this host, from a role
/// of the host that published it.
struct Checked<'a> {
    msg: Message,
    role: &'a str,
    name: &'a str,
    from_host: &'a str,
}

/// Every check of a message before anything is written: its subject names
/// a role of this host, its name is a handoff file name, its size within
/// `limits.max_file_bytes`, it parses, it is addressed to that role, and
/// the host that published it is its sender's.
fn check<'a>(
    s: &Settings,
    roles: &Roles,
    subject: &'a str,
    sent: &Sent<'a>,
    bytes: &[u8],
) -> Result<Checked<'a>, Verdict> {
    let Some(role_name) = s.subject_role(subject) else {
        return Err(Verdict::Reject(format!(
            "subject {subject} is not for host {}",
            s.host
        )));
    };
    let Some(name) = sent.name else {
        return Err(Verdict::Reject("no Swarm-Name header".into()));
    };
    if !grammar::valid_handoff_name(name) {
        return Err(Verdict::Reject(format!(
            "'{}' is not a handoff file name",
            crate::text::escape(name)
        )));
    }
    let max = s.config.limits.max_file_bytes;
    if bytes.len() as u64 > max {
        return Err(Verdict::Reject(format!(
            "{} bytes, more than limits.max_file_bytes ({max})",
            bytes.len()
        )));
    }
    let msg =
        Message::parse_bytes(bytes).map_err(|e| Verdict::Reject(format!("malformed: {e}")))?;
    if msg.recipient() != Some(role_name) {
        return Err(Verdict::Reject(format!(
            "its recipient is not {role_name}, the role its subject names"
        )));
    }
    match roles.find(role_name) {
        Some(r) if !r.is_remote() => {}
        _ => {
            return Err(Verdict::Reject(format!(
                "{role_name} is not a role of host {}",
                s.host
            )))
        }
    }
    let Some(from_host) = sent.from_host else {
        return Err(Verdict::Reject("no Swarm-From-Host header".into()));
    };
    check_sender(s, roles, msg.sender().unwrap_or(""), from_host)?;
    Ok(Checked {
        msg,
        role: role_name,
        name,
        from_host,
    })
}

/// The publishing host must be the sender's host: a host speaks for its
/// own roles only.
fn check_sender(s: &Settings, roles: &Roles, from: &str, from_host: &str) -> Result<(), Verdict> {
    match roles.find(from) {
        Some(r) if r.is_remote() && r.worktree_name.strip_prefix('@') == Some(from_host) => Ok(()),
        Some(r) if r.is_remote() => Err(Verdict::Reject(format!(
            "its sender {from} works on host {}, but host {} published it",
            r.worktree_name.trim_start_matches('@'),
            crate::text::escape(from_host)
        ))),
        Some(_) => Err(Verdict::Reject(format!(
            "its sender {from} works on this host, so it cannot come over the bridge"
        ))),
        None => Err(Verdict::Reject(format!(
            "its sender '{}' is not a role of another host in {}",
            crate::text::escape(from),
            s.project.roles_tsv().display()
        ))),
    }
}

/// Spools a checked message into its role's relay outbox for the daemon,
/// once: a copy held already is `Held`; its approval is kept first, and a
/// `git_handoff` waits until its commit is here.
fn spool(s: &Settings, c: &Checked, approval: Option<&str>, bytes: &[u8]) -> Verdict {
    let (msg, role_name, name) = (&c.msg, c.role, c.name);
    let relay = Worktree::new(s.project.bridge_relay(role_name));
    if spooled(&relay, name) {
        clear_waiting(s, name);
        return Verdict::Held;
    }
    if let Some(a) = approval {
        // Written before the copy is spooled, so the daemon never sees the
        // copy without it.
        if let Err(why) = take_approval(s, msg, c.from_host, a) {
            return Verdict::Wait(why.to_string());
        }
    }
    if msg.kind() == Some(grammar::MessageType::GitHandoff) {
        if let Err(why) = have_commit(s, msg) {
            let why = why.to_string();
            note_waiting(s, name, role_name, &why);
            return Verdict::Wait(why);
        }
    }
    if let Err(e) = fsx::ensure_dirs(&[relay.outbox(), relay.outbox_tmp()]) {
        return Verdict::Wait(format!("{}: {e}", relay.outbox().display()));
    }
    let dest = relay.outbox().join(name);
    match fsx::publish(&relay.outbox_tmp(), &dest, bytes) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Verdict::Held,
        Err(e) => return Verdict::Wait(format!("{}: {e}", dest.display())),
    }
    clear_waiting(s, name);
    Verdict::Spooled(dest)
}

/// The approval a copy carries, taken as this host's approval of that copy
/// when it is for exactly this content: the fingerprint of the copy's
/// original (the copy without `recipient` and `enqueued_at`) must be the
/// one approved, and the publisher was checked to be the sender's host. One
/// for other content, or malformed, is ignored: the copy is held here like
/// any other needing approval.
fn take_approval(s: &Settings, msg: &Message, from_host: &str, a: &str) -> Result<(), Error> {
    let Some((sha, by)) = a.split_once(' ') else {
        return Ok(());
    };
    let hex = sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex || !grammar::valid_role(by) || crate::daemon::gate::original_fingerprint(msg) != sha {
        return Ok(());
    }
    let id = msg.id().unwrap_or_default();
    let via = format!("the bridge, approved on host {from_host}");
    crate::person::holds::approve_ahead(&s.project, id, sha, by, &via)
}

/// Whether the relay folder has this copy already: waiting, held for
/// approval, delivered (`sent/`) or refused (`failed/`). Looked at in the
/// direction files move, so one moving meanwhile is still seen. The daemon
/// keeps the stronger promise, one delivery per id (see
/// `daemon::deliver::relay`).
fn spooled(relay: &Worktree, name: &str) -> bool {
    [relay.outbox(), relay.held(), relay.sent(), relay.failed()]
        .iter()
        .any(|d| d.join(name).exists())
}

/// Why a `git_handoff` from another host waits: its commit is not (yet) in
/// this host's repository.
#[derive(Debug, thiserror::Error)]
enum MissingCommit {
    /// The copy names no [`CommitId`] (the text as it came, escaped).
    #[error("{}", .0.in_commit_header())]
    NotACommitId(NotACommitId),
    #[error("commit {commit} is not in {} and swarm.yaml names no git_remote to fetch it from", root.display())]
    NoRemote { commit: CommitId, root: PathBuf },
    #[error("commit {commit} is not in {} and cannot be fetched from git remote {remote} ({why}); the item waits until it can", root.display())]
    NotFetched {
        commit: CommitId,
        root: PathBuf,
        remote: String,
        why: String,
    },
}

/// The commit of a `git_handoff` is in this host's repository, fetched from
/// `git_remote` when it is not.
fn have_commit(s: &Settings, msg: &Message) -> Result<(), MissingCommit> {
    let given = msg.get(names::COMMIT).unwrap_or("");
    let commit = CommitId::parse(given).map_err(MissingCommit::NotACommitId)?;
    let root = &s.project.root;
    let peeled = commit.peeled();
    let probe = ["rev-parse", "--verify", "-q", &peeled];
    if git::stdout(root, &probe).is_ok() {
        return Ok(());
    }
    let Some(remote) = &s.config.git_remote else {
        return Err(MissingCommit::NoRemote {
            commit,
            root: root.clone(),
        });
    };
    let id = msg.id().unwrap_or("");
    let r = format!("refs/swarm/handoffs/{id}");
    let fetched = git::stdout(
        root,
        &["fetch", "-q", "--no-tags", remote, &format!("+{r}:{r}")],
    );
    if git::stdout(root, &probe).is_ok() {
        return Ok(());
    }
    Err(MissingCommit::NotFetched {
        commit,
        root: root.clone(),
        remote: remote.clone(),
        why: fetched
            .err()
            .map_or_else(|| format!("{r} does not hold it"), |e| e.to_string()),
    })
}

/// `swarm status` shows an item that waits for its commit, and why.
fn note_waiting(s: &Settings, name: &str, role: &str, why: &str) {
    let dir = s.project.bridge_waiting();
    let path = dir.join(name);
    let text = format!("{role}\t{why}\n");
    if std::fs::read_to_string(&path).is_ok_and(|t| t == text) {
        return;
    }
    let _ = fsx::ensure_dirs(&[&dir, &s.project.bridge_tmp()])
        .and_then(|_| fsx::replace(&s.project.bridge_tmp(), &path, text.as_bytes()));
}

fn clear_waiting(s: &Settings, name: &str) {
    let path = s.project.bridge_waiting().join(name);
    if path.exists() {
        let _ = fsx::remove_file(&path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::config::Config;
    use crate::protocol::layout::Project;

    const NAME: &str = "50_20261201T000000Z_000001_from_ping_to_pong.handoff";

    fn setup() -> (tempfile::TempDir, Settings, Roles) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        let proxy = root.join(".swarmforge/bridge/out/ping");
        let tsv = format!(
            "pong\tmaster\t{}\ts\tPong\thuman\ttask\nping\t@a\t{}\t\tPing\thuman\ttask\n",
            root.display(),
            proxy.display()
        );
        let roles = Roles::parse(&tsv);
        let mut config = Config::parse("hosts: [a, b]\nbridge: nats://127.0.0.1:1\n").unwrap();
        config.limits.max_file_bytes = 4096;
        let s = Settings {
            project: Project::new(&root),
            config,
            host: "b".into(),
            url: "nats://127.0.0.1:1".into(),
        };
        (d, s, roles)
    }

    fn msg(recipient: &str) -> String {
        format!(
            "id: 20261201T000000Z_000001_from_ping\nfrom: ping\nto: pong\nrecipient: {recipient}\npriority: 50\ntype: note\nmessage: hi\ncreated_at: 2026-12-01T00:00:00.000000Z\nenqueued_at: 2026-12-01T00:00:00.000001Z\n\nhi\n"
        )
    }

    fn sent<'a>(from_host: Option<&'a str>, name: Option<&'a str>) -> Sent<'a> {
        Sent {
            from_host,
            name,
            approval: None,
        }
    }

    fn verdict(s: &Settings, r: &Roles, subject: &str, name: Option<&str>, b: &[u8]) -> Verdict {
        accept(s, r, subject, sent(Some("a"), name), b)
    }

    #[test]
    fn spools_once_then_holds() {
        let (_d, s, r) = setup();
        let subj = "swarm.swarm.to.b.pong";
        let v = verdict(&s, &r, subj, Some(NAME), msg("pong").as_bytes());
        let Verdict::Spooled(p) = v else {
            panic!("{v:?}")
        };
        let relay = Worktree::new(s.project.bridge_relay("pong"));
        assert_eq!(p, relay.outbox().join(NAME));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), msg("pong"));
        // Never written into the inbox: the daemon delivers it.
        assert!(!Worktree::new(&s.project.root).inbox_new().exists());
        assert_eq!(
            verdict(&s, &r, subj, Some(NAME), msg("pong").as_bytes()),
            Verdict::Held
        );
        // Delivered by the daemon meanwhile: still held, never spooled again.
        std::fs::create_dir_all(relay.sent()).unwrap();
        std::fs::rename(&p, relay.sent().join(NAME)).unwrap();
        assert_eq!(
            verdict(&s, &r, subj, Some(NAME), msg("pong").as_bytes()),
            Verdict::Held
        );
    }

    /// A hostile peer's `git_handoff` whose commit is no [`CommitId`] (an
    /// option, a revision expression, too long) waits with the reason and
    /// never reaches git; a well-formed one this host lacks, with no
    /// `git_remote` to fetch it from, waits with that reason. Nothing is
    /// spooled either way.
    #[test]
    fn a_commit_that_is_no_commit_id_waits_and_never_reaches_git() {
        let (_d, s, r) = setup();
        let subj = "swarm.swarm.to.b.pong";
        let handoff = |commit: &str| {
            msg("pong")
                .replace("type: note\nmessage: hi\n", "type: git_handoff\ntask: t\n")
                .replace("from: ping\n", &format!("from: ping\ncommit: {commit}\n"))
        };
        let long = "a".repeat(65);
        for bad in ["--upload-pack=touch x", "HEAD~1", "abcd^{tree}", &long] {
            let v = verdict(&s, &r, subj, Some(NAME), handoff(bad).as_bytes());
            let want = format!("commit '{}' is not a commit id", crate::text::escape(bad));
            assert_eq!(v, Verdict::Wait(want), "{bad:?}");
        }
        let v = verdict(&s, &r, subj, Some(NAME), handoff("0123456789").as_bytes());
        let Verdict::Wait(why) = v else {
            panic!("{v:?}")
        };
        assert!(
            why.starts_with("commit 0123456789 is not in ")
                && why.ends_with(" and swarm.yaml names no git_remote to fetch it from"),
            "{why}"
        );
        let relay = Worktree::new(s.project.bridge_relay("pong"));
        assert!(!relay.outbox().join(NAME).exists());
    }

    #[test]
    fn refuses_what_cannot_be_a_copy_for_a_local_role() {
        let (_d, s, r) = setup();
        let ok = msg("pong");
        let reject = |subject: &str, name: Option<&str>, bytes: &[u8]| {
            let v = verdict(&s, &r, subject, name, bytes);
            assert!(matches!(v, Verdict::Reject(_)), "{subject} {name:?}: {v:?}");
        };
        reject("swarm.swarm.to.a.pong", Some(NAME), ok.as_bytes());
        reject("swarm.swarm.to.b.pong", None, ok.as_bytes());
        reject(
            "swarm.swarm.to.b.pong",
            Some("../../etc/passwd"),
            ok.as_bytes(),
        );
        reject("swarm.swarm.to.b.pong", Some(NAME), msg("ping").as_bytes());
        reject("swarm.swarm.to.b.ping", Some(NAME), msg("ping").as_bytes());
        reject(
            "swarm.swarm.to.b.ghost",
            Some(NAME),
            msg("ghost").as_bytes(),
        );
        reject("swarm.swarm.to.b.pong", Some(NAME), b"no headers at all");
        // A sender that is a role of this host, or no role, is forged.
        let forged = ok.replace("from: ping", "from: pong");
        reject("swarm.swarm.to.b.pong", Some(NAME), forged.as_bytes());
        let ghost = ok.replace("from: ping", "from: ghost");
        reject("swarm.swarm.to.b.pong", Some(NAME), ghost.as_bytes());
        reject(
            "swarm.swarm.to.b.pong",
            Some(NAME),
            ok.replace("hi\n", "h\x1b[2Ji\n").as_bytes(),
        );
        reject(
            "swarm.swarm.to.b.pong",
            Some(NAME),
            format!("{ok}{}", "x".repeat(5000)).as_bytes(),
        );
        // A host speaks for its own roles only.
        let v = accept(
            &s,
            &r,
            "swarm.swarm.to.b.pong",
            sent(Some("c"), Some(NAME)),
            ok.as_bytes(),
        );
        assert!(
            matches!(&v, Verdict::Reject(w) if w.contains("host c published it")),
            "{v:?}"
        );
        let v = accept(
            &s,
            &r,
            "swarm.swarm.to.b.pong",
            sent(None, Some(NAME)),
            ok.as_bytes(),
        );
        assert!(
            matches!(&v, Verdict::Reject(w) if w.contains("Swarm-From-Host")),
            "{v:?}"
        );
        assert!(!s.project.bridge_relay("pong").exists());
    }

    #[test]
    fn an_approval_is_taken_only_for_the_content_it_names() {
        let (_d, s, r) = setup();
        let subj = "swarm.swarm.to.b.pong";
        let copy = Message::parse(&msg("pong")).unwrap();
        let right = crate::daemon::gate::original_fingerprint(&copy);
        let record = s.project.approvals_dir().join(copy.id().unwrap());
        let with = |a: &str, name: &str, body: &str| {
            let sent = Sent {
                from_host: Some("a"),
                name: Some(name),
                approval: Some(a),
            };
            accept(&s, &r, subj, sent, body.as_bytes())
        };
        // Other content, or no fingerprint at all: ignored, still spooled
        // (the daemon holds it if it needs approval).
        let other = "ab".repeat(32);
        let v = with(&format!("{other} alice"), NAME, &msg("pong"));
        assert!(matches!(v, Verdict::Spooled(_)), "{v:?}");
        assert!(!record.exists());
        let name2 = NAME.replace("000001", "000002");
        let body2 = msg("pong").replace("000001_from", "000002_from");
        let v = with("nonsense", &name2, &body2);
        assert!(matches!(v, Verdict::Spooled(_)), "{v:?}");
        // This very content: recorded before the copy is spooled.
        let name3 = NAME.replace("000001", "000003");
        let body3 = msg("pong").replace("000001_from", "000003_from");
        let copy3 = Message::parse(&body3).unwrap();
        let fp3 = crate::daemon::gate::original_fingerprint(&copy3);
        assert_ne!(fp3, right);
        let v = with(&format!("{fp3} alice"), &name3, &body3);
        assert!(matches!(v, Verdict::Spooled(_)), "{v:?}");
        assert!(crate::daemon::gate::approved(&s.project, &copy3));
        let text =
            std::fs::read_to_string(s.project.approvals_dir().join(copy3.id().unwrap())).unwrap();
        assert!(
            text.contains("by: alice\n") && text.contains("approved on host a"),
            "{text}"
        );
    }
}
