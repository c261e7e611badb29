//! The receiving side: one message from JetStream, validated like any
//! untrusted file, written into the recipient's `inbox/new` the usual way
//! (temp, fsync, no-clobber rename, fsync of the folder), unless the inbox
//! already holds it anywhere. The caller acks only after `Written` or `Held`.

use std::path::PathBuf;

use super::outbound::git;
use super::Settings;
use crate::daemon::wake;
use crate::fsx;
use crate::protocol::fields;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::{batch_dirs, Worktree};
use crate::protocol::roles::Roles;

/// What became of a received message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Durable in the inbox: ack.
    Written(PathBuf),
    /// The inbox already holds it (a redelivery): ack.
    Held,
    /// Cannot be handed out yet (its commit is missing, the inbox is not
    /// writable): leave it unacknowledged and retry.
    Wait(String),
    /// Never deliverable: terminate it, with this reason logged.
    Reject(String),
}

/// Checks and writes one message that arrived on `subject` with the file
/// name `name`.
pub fn accept(
    s: &Settings,
    roles: &Roles,
    waker: Option<&wake::Waker>,
    subject: &str,
    name: Option<&str>,
    bytes: &[u8],
) -> Verdict {
    let Some(role_name) = s.subject_role(subject) else {
        return Verdict::Reject(format!("subject {subject} is not for host {}", s.host));
    };
    let Some(name) = name else {
        return Verdict::Reject("no Swarm-Name header".into());
    };
    if !grammar::valid_handoff_name(name) {
        return Verdict::Reject(format!(
            "'{}' is not a handoff file name",
            crate::text::escape(name)
        ));
    }
    let max = s.config.limits.max_file_bytes;
    if bytes.len() as u64 > max {
        return Verdict::Reject(format!(
            "{} bytes, more than limits.max_file_bytes ({max})",
            bytes.len()
        ));
    }
    let msg = match Message::parse_bytes(bytes) {
        Ok(m) => m,
        Err(e) => return Verdict::Reject(format!("malformed: {e}")),
    };
    let (id, priority) = (
        msg.get("id").unwrap_or(""),
        msg.get("priority").unwrap_or(""),
    );
    if !grammar::valid_message_id(id) || !grammar::name_matches(name, priority, id) {
        return Verdict::Reject(format!(
            "file name {name} does not match its id and priority"
        ));
    }
    if msg.get("recipient") != Some(role_name) {
        return Verdict::Reject(format!(
            "its recipient is not {role_name}, the role its subject names"
        ));
    }
    let from = msg.get("from").unwrap_or("");
    let to = msg.get("to").unwrap_or("");
    if !grammar::addressed(to, from, role_name) && !grammar::in_cc(msg.get("cc"), role_name) {
        return Verdict::Reject(format!("it is not addressed to {role_name}"));
    }
    // The sending daemon checked that `from` owns the outbox (D8); here the
    // sender must at least be a role of another host, named by the id.
    match roles.find(from) {
        Some(r) if r.is_remote() && grammar::id_names_sender(id, from) => {}
        Some(r) if !r.is_remote() => {
            return Verdict::Reject(format!(
                "its sender {from} works on this host, so it cannot come over the bridge"
            ))
        }
        _ => {
            return Verdict::Reject(format!(
                "its sender '{}' is not a role of another host in {}",
                crate::text::escape(from),
                s.project.roles_tsv().display()
            ))
        }
    }
    let Some(role) = roles.find(role_name) else {
        return Verdict::Reject(format!(
            "{role_name} is not a role in {}",
            s.project.roles_tsv().display()
        ));
    };
    if role.is_remote() {
        return Verdict::Reject(format!("{role_name} does not work on host {}", s.host));
    }
    let wt = Worktree::new(&role.worktree_path);
    if holds(&wt, name) {
        clear_waiting(s, name);
        return Verdict::Held;
    }
    if msg.get("type") == Some("git_handoff") {
        if let Err(why) = have_commit(s, &msg) {
            note_waiting(s, name, role_name, &why);
            return Verdict::Wait(why);
        }
    }
    if let Some(link) = wt.symlinked_inbox_folder() {
        return Verdict::Wait(crate::protocol::layout::symlinked_inbox_reason(&link));
    }
    if let Err(e) = fsx::ensure_dirs(&wt.inbox_dirs()) {
        return Verdict::Wait(format!("{}: {e}", wt.inbox().display()));
    }
    let dest = wt.inbox_new().join(name);
    match fsx::publish(&wt.inbox_tmp(), &dest, bytes) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Verdict::Held,
        Err(e) => return Verdict::Wait(format!("{}: {e}", dest.display())),
    }
    clear_waiting(s, name);
    if let Some(w) = waker.filter(|_| role.wakes_here() && fields::wakes(&msg, role_name)) {
        w.wake(wake::Request {
            role: role.name.clone(),
            session: role.session.clone(),
            worktree: role.worktree_path.clone(),
            path: dest.clone(),
            method: wake::method(&s.project, &s.config),
            rewake: false,
        });
    }
    Verdict::Written(dest)
}

/// Whether the inbox holds `name` anywhere: new, in process, completed, in
/// any batch folder, or completed under a collision name. Looked at in the
/// direction items move, so an item moving meanwhile is still seen.
pub fn holds(wt: &Worktree, name: &str) -> bool {
    let quick = [wt.inbox_new(), wt.in_process(), wt.completed()];
    if quick.iter().any(|d| d.join(name).exists()) {
        return true;
    }
    let batches = batch_dirs(&wt.in_process())
        .into_iter()
        .chain(batch_dirs(&wt.completed()));
    for b in batches {
        if b.join(name).exists() {
            return true;
        }
    }
    let Ok(rd) = std::fs::read_dir(wt.completed()) else {
        return false;
    };
    rd.flatten()
        .any(|e| grammar::strip_collision_prefix(&e.file_name().to_string_lossy()) == name)
}

/// The commit of a `git_handoff` is in this host's repository, fetched from
/// `git_remote` when it is not.
fn have_commit(s: &Settings, msg: &Message) -> Result<(), String> {
    let commit = msg.get("commit").unwrap_or("");
    if commit.is_empty() || commit.len() > 64 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "commit '{}' is not a commit id",
            crate::text::escape(commit)
        ));
    }
    let root = &s.project.root;
    let probe = [
        "rev-parse".to_string(),
        "--verify".into(),
        "-q".into(),
        format!("{commit}^{{commit}}"),
    ];
    let probe: Vec<&str> = probe.iter().map(String::as_str).collect();
    if git(root, &probe).is_ok() {
        return Ok(());
    }
    let Some(remote) = &s.config.git_remote else {
        return Err(format!(
            "commit {commit} is not in {} and swarm.yaml names no git_remote to fetch it from",
            root.display()
        ));
    };
    let id = msg.get("id").unwrap_or("");
    let r = format!("refs/swarm/handoffs/{id}");
    let fetched = git(
        root,
        &["fetch", "-q", "--no-tags", remote, &format!("+{r}:{r}")],
    );
    if git(root, &probe).is_ok() {
        return Ok(());
    }
    Err(format!(
        "commit {commit} is not in {} and cannot be fetched from git remote {remote} ({}); the item waits until it can",
        root.display(),
        fetched.err().unwrap_or_else(|| format!("{r} does not hold it"))
    ))
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

    fn verdict(s: &Settings, r: &Roles, subject: &str, name: Option<&str>, b: &[u8]) -> Verdict {
        accept(s, r, None, subject, name, b)
    }

    #[test]
    fn writes_once_then_holds() {
        let (_d, s, r) = setup();
        let subj = "swarm.swarm.to.b.pong";
        let v = verdict(&s, &r, subj, Some(NAME), msg("pong").as_bytes());
        let Verdict::Written(p) = v else {
            panic!("{v:?}")
        };
        assert_eq!(std::fs::read_to_string(&p).unwrap(), msg("pong"));
        assert_eq!(
            verdict(&s, &r, subj, Some(NAME), msg("pong").as_bytes()),
            Verdict::Held
        );
        // Accepted and completed meanwhile: still held, never a second copy.
        let wt = Worktree::new(&s.project.root);
        std::fs::create_dir_all(wt.completed().join("batch_x")).unwrap();
        std::fs::rename(
            &p,
            wt.completed()
                .join(format!("2026-12-01T00:00:00.000000Z_{NAME}")),
        )
        .unwrap();
        assert_eq!(
            verdict(&s, &r, subj, Some(NAME), msg("pong").as_bytes()),
            Verdict::Held
        );
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
        reject(
            "swarm.swarm.to.b.pong",
            Some("50_20261201T000000Z_000002_from_ping_to_pong.handoff"),
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
        assert!(Worktree::new(&s.project.root)
            .inbox_new()
            .read_dir()
            .is_err());
    }
}
