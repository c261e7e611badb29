//! `swarm-handoff <draft>`: validate a draft and queue it in the sender's
//! outbox (§5), published atomically (D7).

use std::path::{Path, PathBuf};

use crate::clock;
use crate::config::Config;
use crate::discover::{self, Located};
use crate::draft;
use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::gitcheck;
use crate::header::Message;
use crate::roles::{Role, Roles};
use crate::rules;
use crate::sequence;

/// Body line every generated handoff starts with.
pub const BODY_PREAMBLE: &str = "Re-read your role and constitution.";

/// A queued handoff.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Queued {
    pub path: PathBuf,
    pub id: String,
    pub sequence: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub to: Vec<String>,
    pub priority: String,
}

/// Why a send did not queue anything.
#[derive(Debug)]
pub enum SendError {
    /// Invalid draft (exit 2): the draft is kept and nothing was written.
    Invalid {
        draft: String,
        errors: Vec<String>,
    },
    Other(Error),
}

impl From<Error> for SendError {
    fn from(e: Error) -> Self {
        SendError::Other(e)
    }
}

impl SendError {
    pub fn exit_code(&self) -> i32 {
        match self {
            SendError::Invalid { .. } => crate::error::exit::REFUSED,
            SendError::Other(e) => e.exit_code(),
        }
    }
}

/// The draft path as shown in messages, normalised like Java's
/// `Path.normalize` (which SwarmForge applied to the argument): empty and `.`
/// segments dropped, `name/..` folded, `..` at the root dropped.
pub fn shown_path(arg: &str) -> String {
    let absolute = arg.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in arg.split('/') {
        match seg {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Canonical paths compare equal even through symlinked temp dirs.
pub fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Checks that the acting role works in the located worktree, so a message is
/// never queued where the daemon will not look (§15.13).
pub fn check_role_worktree(role: &Role, at: &Located) -> Result<()> {
    if same_dir(&role.worktree_path, &at.worktree.root) {
        return Ok(());
    }
    Err(Error::env(format!(
        "Role {} works in {}, but this command runs in worktree {}.\n  hint: cd into the role's worktree, or fix column 3 of {}",
        role.name,
        role.worktree_path.display(),
        at.worktree.root.display(),
        at.project.roles_tsv().display()
    )))
}

/// File name `<NN>_<IDTS>_<SEQ>_from_<sender>_to_<r1>_<r2>.handoff`, the
/// recipient part shortened when it would exceed NAME_MAX (§15.16).
pub fn file_name(priority: &str, id: &str, recipients: &[String]) -> String {
    let full = format!("{priority}_{id}_to_{}.handoff", recipients.join("_"));
    if full.len() <= 240 {
        return full;
    }
    format!(
        "{priority}_{id}_to_{}_and_{}_more.handoff",
        recipients[0],
        recipients.len() - 1
    )
}

/// Everything `swarm-handoff` does before printing `HANDOFF QUEUED:`.
pub fn queue(draft_arg: &str, cwd: &Path) -> std::result::Result<Queued, SendError> {
    let shown = shown_path(draft_arg);
    let draft_path = if Path::new(draft_arg).is_absolute() {
        PathBuf::from(draft_arg)
    } else {
        cwd.join(draft_arg)
    };
    if !draft_path.is_file() {
        return Err(Error::env(format!("Draft file not found: {shown}")).into());
    }
    let sender = discover::acting_role()?;
    let at = discover::locate(cwd)?;
    let roles = Roles::load(&at.project.roles_tsv())?;
    let Some(role) = roles.find(&sender) else {
        return Err(Error::env(format!("Unknown sender role: {sender}")).into());
    };
    check_role_worktree(role, &at)?;
    let config = Config::load(&at.project.config_file())?;
    fsx::set_fsync(config.daemon.fsync);

    let bytes = match fsx::read_bounded(&draft_path, draft::MAX_DRAFT_BYTES as u64) {
        Ok(b) => b,
        Err(fsx::ReadRefusal::TooLarge(n)) => {
            return Err(SendError::Invalid {
                draft: shown,
                errors: vec![format!(
                    "Draft must be no larger than {} bytes; got {n}.",
                    draft::MAX_DRAFT_BYTES
                )],
            })
        }
        // A symlinked draft is read through; containment is checked below.
        Err(fsx::ReadRefusal::Symlink) => read_symlinked_draft(&draft_path, &at, &shown)?,
        Err(e) => return Err(Error::env(format!("Cannot read draft {shown}: {e}")).into()),
    };
    let parsed = draft::parse_bytes(&bytes);
    if std::str::from_utf8(&bytes).is_err() {
        // Nothing was parsed, so "missing header" errors would only mislead.
        return Err(SendError::Invalid {
            draft: shown,
            errors: parsed.errors,
        });
    }
    let mut errors = parsed.errors.clone();
    let mut canonical = None;
    let repo = at.worktree.root.clone();
    errors.extend(rules::validate(
        &parsed.fields,
        &|r| roles.find(r).is_some(),
        &mut |c| {
            canonical = Some(gitcheck::canonical_commit(&repo, c)?);
            Ok(())
        },
    ));
    let field = |n: &str| {
        parsed
            .fields
            .iter()
            .find(|(f, _)| f == n)
            .map(|(_, v)| v.clone())
    };
    let ty = field("type").unwrap_or_default();
    if !errors.is_empty() {
        return Err(SendError::Invalid {
            draft: shown,
            errors,
        });
    }

    let to = field("to").unwrap_or_default();
    let priority = field("priority").unwrap_or_default();
    let recipients = rules::recipients(&to);
    let wt = &at.worktree;
    fsx::ensure_dirs(&wt.send_dirs()).at(wt.handoffs())?;
    let now = clock::now();
    let seq = sequence::format(sequence::next(wt)?);
    let id = format!("{}_{seq}_from_{sender}", clock::idts(now));
    let mut msg = Message::default();
    msg.set("id", &id);
    msg.set("from", &sender);
    msg.set("to", recipients.join(","));
    msg.set("priority", &priority);
    msg.set("type", &ty);
    let payload = if ty == rules::GIT_HANDOFF.name {
        let commit = canonical.unwrap_or_default();
        msg.set("role", &sender);
        msg.set("task", field("task").unwrap_or_default());
        msg.set("commit", &commit);
        format!("merge_and_process {sender} {commit}")
    } else {
        let m = field("message").unwrap_or_default();
        msg.set("message", &m);
        m
    };
    msg.set("created_at", clock::iso(now));
    msg.body = format!("{BODY_PREAMBLE}\n\n{payload}\n");

    let name = file_name(&priority, &id, &recipients);
    let dest = wt.outbox().join(&name);
    fsx::publish(&wt.outbox_tmp(), &dest, msg.render().as_bytes()).at(&dest)?;
    Ok(Queued {
        path: dest,
        id,
        sequence: seq,
        kind: ty,
        to: recipients,
        priority,
    })
}

fn read_symlinked_draft(
    path: &Path,
    at: &Located,
    shown: &str,
) -> std::result::Result<Vec<u8>, SendError> {
    let target = path
        .canonicalize()
        .map_err(|e| Error::env(format!("Cannot read draft {shown}: {e}")))?;
    let inside = [&at.worktree.root, &at.project.root]
        .iter()
        .filter_map(|r| r.canonicalize().ok())
        .any(|r| target.starts_with(r));
    if !inside {
        return Err(Error::env(format!(
            "Draft file {shown} is a symlink to {} outside the project; refusing to read it.",
            target.display()
        ))
        .into());
    }
    fsx::read_bounded(&target, draft::MAX_DRAFT_BYTES as u64)
        .map_err(|e| Error::env(format!("Cannot read draft {shown}: {e}")).into())
}

/// Deletes the draft after the queued line was printed (best effort: the
/// handoff is queued whatever happens here, §15.23).
pub fn discard_draft(draft_arg: &str, cwd: &Path) -> Option<String> {
    let p = if Path::new(draft_arg).is_absolute() {
        PathBuf::from(draft_arg)
    } else {
        cwd.join(draft_arg)
    };
    fsx::remove_file(&p).err().map(|e| {
        format!(
            "warning: handoff queued, but the draft {} could not be deleted: {e}",
            p.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::shown_path;

    #[test]
    fn shown_path_normalises_like_java() {
        for (arg, want) in [
            ("draft.txt", "draft.txt"),
            ("./draft.txt", "draft.txt"),
            ("a//b/./c/../d", "a/b/d"),
            ("../x", "../x"),
            ("a/../../x", "../x"),
            ("/../x", "/x"),
            ("//tmp///d/", "/tmp/d"),
        ] {
            assert_eq!(shown_path(arg), want, "{arg}");
        }
    }
}
