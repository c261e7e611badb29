//! The sending side: the copies the daemon delivered into the proxy inboxes
//! of roles on other hosts, what to publish for each, and the move to the
//! proxy's `sent/` once JetStream acknowledged it.

use crate::protocol::header::names;
use std::path::{Path, PathBuf};

use super::{Log, Refused, Settings};
use crate::error::Error;
use crate::fsx;
use crate::protocol::commit_id::CommitId;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::layout::Worktree;
use crate::protocol::roles::Roles;
use crate::protocol::store;
use crate::sys::git;

/// One proxy copy, ready to publish.
#[derive(Clone, Debug)]
pub struct Outgoing {
    pub path: PathBuf,
    pub name: String,
    pub role: String,
    pub host: String,
    /// `Nats-Msg-Id`: `<id>:<recipient>`, so JetStream de-duplicates a
    /// re-publish after a crash between the ack and the move.
    pub msg_id: String,
    pub bytes: Vec<u8>,
    /// A `git_handoff`'s commit, which must reach the git remote first.
    pub commit: Option<String>,
    pub id: String,
    /// The proxy worktree the copy sits in.
    pub proxy: Worktree,
    /// `Swarm-Approval`: a person's approval of it on this host
    /// (`holds::carried_approval`).
    pub approval: Option<String>,
}

impl Outgoing {
    /// The ref the commit travels under (one per message, so a rewritten
    /// branch never takes it away before the receiver fetched it).
    pub fn git_ref(&self) -> String {
        format!("refs/swarm/handoffs/{}", self.id)
    }
}

/// The proxy worktrees of this host: (role, host, worktree).
pub fn proxies(roles: &Roles) -> Vec<(String, String, Worktree)> {
    roles
        .roles
        .iter()
        .filter(|r| r.is_remote())
        .map(|r| {
            (
                r.name.clone(),
                r.worktree_name.trim_start_matches('@').to_string(),
                Worktree::new(&r.worktree_path),
            )
        })
        .collect()
}

/// Up to `limit` proxy copies waiting to be published, oldest name first per
/// proxy. A copy that cannot be a message (the daemon wrote it, so only a
/// hand-planted file) is moved to the proxy's `inbox/rejected/` and logged.
pub fn scan(s: &Settings, log: &Log, limit: usize) -> Vec<Outgoing> {
    let roles = match Roles::load(&s.project.roles_tsv()) {
        Ok(r) => r,
        Err(e) => {
            log.deferred("roles.tsv", &e.to_string());
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (role, host, wt) in proxies(&roles) {
        let dir = wt.inbox_new();
        for e in store::scan(&dir).named() {
            if out.len() >= limit {
                return out;
            }
            let (name, path) = (e.name.clone(), e.path.clone());
            match read_copy(s, &path, &name, &role) {
                Ok((id, bytes, commit, approval)) => out.push(Outgoing {
                    msg_id: format!("{id}:{role}"),
                    path,
                    name,
                    role: role.clone(),
                    host: host.clone(),
                    bytes,
                    commit,
                    id,
                    proxy: wt.clone(),
                    approval,
                }),
                Err(reason) => reject(log, &wt, &path, &reason.0),
            }
        }
    }
    out
}

type Copy = (String, Vec<u8>, Option<String>, Option<String>);

fn read_copy(s: &Settings, path: &Path, name: &str, role: &str) -> Result<Copy, Refused> {
    if !grammar::valid_handoff_name(name) {
        return Err(Refused::from("not a handoff file name"));
    }
    let bytes = fsx::read_bounded(path, s.config.limits.max_file_bytes)
        .map_err(|e| Refused(format!("cannot read: {e}")))?;
    let msg = Message::parse_bytes(&bytes).map_err(|e| Refused(format!("malformed: {e}")))?;
    let id = msg.id().unwrap_or_default().to_string();
    if !grammar::valid_message_id(&id) {
        return Err(Refused::from("no valid id"));
    }
    if msg.recipient() != Some(role) {
        return Err(Refused(format!("its recipient is not {role}")));
    }
    let commit = (msg.kind() == Some(grammar::MessageType::GitHandoff))
        .then(|| msg.get(names::COMMIT).unwrap_or_default().to_string());
    let approval = crate::person::holds::carried_approval(&s.project, &msg);
    Ok((id, bytes, commit, approval))
}

fn reject(log: &Log, wt: &Worktree, path: &Path, reason: &str) {
    let dest = wt.rejected();
    match fsx::move_into_unique(path, &dest, grammar::collision_names(path)) {
        Ok(p) => log.line("rejected", &format!("{} {reason}", p.display())),
        // Gone already (a concurrent cleanup) or unmovable: say so once.
        Err(e) => log.deferred(&path.display().to_string(), &format!("{reason}; {e}")),
    }
}

/// Pushes a `git_handoff`'s commit to `git_remote` under its message's ref
/// (no-op without a remote: the receiver then needs the commit some other
/// way, and waits until it has it).
pub fn push_commit(s: &Settings, o: &Outgoing) -> Result<(), Error> {
    let (Some(commit), Some(remote)) = (&o.commit, &s.config.git_remote) else {
        return Ok(());
    };
    // The one rule, as the inbound side applies it: an id that is none
    // waits with the same words and never reaches git.
    let commit = CommitId::parse(commit).map_err(|e| Error::process(e.in_commit_header()))?;
    let root = &s.project.root;
    let full =
        git::stdout(root, &["rev-parse", "--verify", "-q", &commit.peeled()]).map_err(|e| {
            Error::process(format!("commit {commit} is not in {}: {e}", root.display()))
        })?;
    git::stdout(
        root,
        &[
            "push",
            "-q",
            "--no-verify",
            remote,
            &format!("+{full}:{}", o.git_ref()),
        ],
    )
    .map(|_| ())
    .map_err(|e| {
        Error::process(format!(
            "cannot push commit {commit} to git remote {remote}: {e}"
        ))
    })
}

/// JetStream acknowledged the copy: it leaves the proxy inbox for the
/// proxy's `sent/` (a crash before this re-publishes; JetStream and the
/// receiver both drop the duplicate).
pub fn mark_sent(o: &Outgoing) -> std::io::Result<PathBuf> {
    let sent = o.proxy.sent();
    match fsx::move_into_unique(&o.path, &sent, grammar::collision_names(&o.path)) {
        Ok(p) => Ok(p),
        Err(e) => match fsx::moved_to(&e) {
            Some(p) => Ok(p.to_path_buf()),
            None => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::config::Config;
    use crate::protocol::layout::Project;

    /// A copy whose `commit` is no commit id (a hand-planted file: the
    /// daemon's checks refuse one) waits with the inbound side's words and
    /// never reaches git, where it once went as `<text>^{commit}`.
    #[test]
    fn a_commit_that_is_no_commit_id_waits_with_the_inbound_words() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        let config =
            Config::parse("hosts: [a, b]\nbridge: nats://127.0.0.1:1\ngit_remote: origin\n")
                .unwrap();
        let s = Settings {
            project: Project::new(&root),
            config,
            host: "a".into(),
            url: "nats://127.0.0.1:1".into(),
        };
        let long = "a".repeat(65);
        for bad in ["--output=x", "HEAD~1", "abcd^{tree}", "", &long] {
            let o = Outgoing {
                path: root.join("x.handoff"),
                name: "x.handoff".into(),
                role: "pong".into(),
                host: "b".into(),
                msg_id: "i:pong".into(),
                bytes: Vec::new(),
                commit: Some(bad.to_string()),
                id: "i".into(),
                proxy: Worktree::new(root.join("proxy")),
                approval: None,
            };
            let e = push_commit(&s, &o).unwrap_err().to_string();
            let want = format!("commit '{}' is not a commit id", crate::text::escape(bad));
            assert!(e.contains(&want), "{bad:?}: {e}");
        }
    }
}
