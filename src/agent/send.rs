//! `swarm-handoff <draft>`: validate a draft and queue it in the sender's
//! outbox (§5), published atomically (D7).

use std::path::{Path, PathBuf};

use crate::agent::artifacts;
use crate::agent::queue::{self, Item};
use crate::error::{Error, IoContext, Result, Token};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::config::Config;
use crate::protocol::draft::{self, Draft};
use crate::protocol::fields;
use crate::protocol::gitcheck;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::roles::{Role, Roles};
use crate::protocol::root::{self, Located};
use crate::protocol::rules;
use crate::protocol::sequence;
use crate::protocol::types;

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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    #[serde(skip_serializing_if = "is_zero")]
    pub hop: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<artifacts::Stamped>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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

/// Who sends: the role, where it works, and the project's tables.
pub struct Sender {
    pub role: String,
    pub at: Located,
    pub roles: Roles,
    pub config: Config,
}

impl Sender {
    /// `role` sending from its own worktree (`swarm answer` acts for the
    /// role that received the clarify).
    pub fn as_role(project: &crate::protocol::layout::Project, role: &str) -> Result<Sender> {
        let roles = Roles::load(&project.roles_tsv())?;
        let Some(r) = roles.find(role) else {
            return Err(Error::env(format!(
                "Unknown sender role: {role}{}",
                roles.unknown_hint(&project.roles_tsv())
            )));
        };
        let wt = if r.worktree_path.is_absolute() {
            r.worktree_path.clone()
        } else {
            project.root.join(&r.worktree_path)
        };
        let config = Config::load(&project.config_file())?;
        Ok(Sender {
            role: role.to_string(),
            at: Located {
                worktree: crate::protocol::layout::Worktree::new(wt),
                project: project.clone(),
            },
            roles,
            config,
        })
    }

    /// `role` sending from the worktree `cwd` is in: the checks every send
    /// makes before reading a draft (known role, its own worktree), and the
    /// project's fsync setting applied.
    pub fn locate(role: &str, cwd: &Path) -> Result<Sender> {
        let at = root::locate(cwd)?;
        let roles = Roles::load(&at.project.roles_tsv())?;
        let Some(r) = roles.find(role) else {
            return Err(Error::env(format!(
                "Unknown sender role: {role}{}",
                roles.unknown_hint(&at.project.roles_tsv())
            )));
        };
        check_role_worktree(r, &at)?;
        let config = Config::load(&at.project.config_file())?;
        fsx::set_fsync(config.daemon.fsync);
        Ok(Sender {
            role: role.to_string(),
            at,
            roles,
            config,
        })
    }

    fn is_human(&self) -> bool {
        self.roles.find(&self.role).is_some_and(Role::is_human)
    }
}

/// Everything `swarm-handoff` does before printing `HANDOFF QUEUED:`.
pub fn queue(draft_arg: &str, cwd: &Path) -> Result<Queued> {
    let shown = shown_path(draft_arg);
    let draft_path = if Path::new(draft_arg).is_absolute() {
        PathBuf::from(draft_arg)
    } else {
        cwd.join(draft_arg)
    };
    if !draft_path.is_file() {
        return Err(Error::env(format!("Draft file not found: {shown}")));
    }
    let s = Sender::locate(&root::acting_role()?, cwd)?;
    let at = &s.at;

    let read_path = resolve_draft(&draft_path, at, &shown)?.unwrap_or(draft_path.clone());
    let bytes = match fsx::read_bounded(&read_path, draft::MAX_DRAFT_BYTES as u64) {
        Ok(b) => b,
        Err(fsx::ReadRefusal::TooLarge(n)) => {
            return Err(Error::invalid(
                Token::HandoffInvalid,
                shown,
                vec![format!(
                    "Draft must be no larger than {} bytes; got {n}.",
                    draft::MAX_DRAFT_BYTES
                )],
            ))
        }
        // A symlinked draft is read through; containment is checked below.
        Err(fsx::ReadRefusal::Symlink) => read_symlinked_draft(&draft_path, at, &shown)?,
        Err(e) => return Err(Error::env(format!("Cannot read draft {shown}: {e}"))),
    };
    let parsed = draft::parse_bytes(&bytes);
    if std::str::from_utf8(&bytes).is_err() {
        // Nothing was parsed, so "missing header" errors would only mislead.
        return Err(Error::invalid(Token::HandoffInvalid, shown, parsed.errors));
    }
    submit(&s, &parsed, &shown)
}

/// The stamps a message gets from its context (docs/message-model.md).
#[derive(Default)]
struct Context {
    parent: Option<Item>,
    thread: Option<String>,
    hop: u32,
    artifacts: Vec<artifacts::Stamped>,
}

/// Whether an inbox item was meant for `role` (roles sharing a worktree
/// share its inbox).
fn meant_for(item: &Item, role: &str) -> bool {
    let from = item.header("from").unwrap_or("");
    item.header("recipient") == Some(role)
        || crate::protocol::grammar::addressed(item.header("to").unwrap_or(""), from, role)
        || crate::protocol::grammar::role_list(item.header("cc")).contains(&role)
}

/// The collaboration checks that need the files: the message replied to,
/// its thread and hop, an answer against its clarify, `to: all`, artifacts.
fn context(s: &Sender, d: &Draft, rule: &types::TypeRule, errors: &mut Vec<String>) -> Context {
    let mut c = Context::default();
    let wt = &s.at.worktree;
    let max = s.config.limits.max_file_bytes;
    let given = d.get("in_reply_to").filter(|v| !fields::blank(v));
    c.parent = match given {
        Some(id) if crate::protocol::grammar::valid_message_id(id) => {
            let found = queue::find_item(wt, id, max);
            if found.is_none() {
                errors.push(format!(
                    "Header 'in_reply_to' must name a message in your inbox; got '{id}'."
                ));
            }
            found
        }
        Some(_) => None,
        None => queue::current_item(wt, max).filter(|i| meant_for(i, &s.role)),
    };
    if let Some(p) = &c.parent {
        let pid = p.header("id").unwrap_or("");
        let derived = p.header("thread").unwrap_or(pid).to_string();
        if let Some(t) = d
            .get("thread")
            .filter(|t| crate::protocol::grammar::valid_message_id(t))
        {
            if t != derived {
                errors.push(format!(
                    "Header 'thread' must be '{derived}', the thread of '{pid}'; got '{t}'."
                ));
            }
        }
        c.thread = Some(derived);
        // A new task, or a person speaking, ends an agents' reply chain; a
        // reaction is no step in it (nobody answers a reaction).
        if rule.name != types::GIT_HANDOFF.name && rule.name != types::REACT.name && !s.is_human() {
            c.hop = fields::hop(&p.msg).unwrap_or(0).saturating_add(1);
        }
        if c.hop > s.config.max_hops {
            errors.push(format!(
                "Reply would be hop {}, past max_hops {} (in reply to '{pid}'); start a new task with a git_handoff or ask a person.",
                c.hop, s.config.max_hops
            ));
        }
    } else if let Some(t) = d
        .get("thread")
        .filter(|t| crate::protocol::grammar::valid_message_id(t))
    {
        c.thread = Some(t.to_string());
    }
    if rule.name == types::ANSWER.name {
        answer_checks(d, c.parent.as_ref(), given.is_some(), errors);
    }
    if rule.name == types::REACT.name && c.parent.is_none() && given.is_none() {
        errors.push("Missing required header 'in_reply_to' for react.".to_string());
    }
    if d.get("to") == Some("all") && !s.roles.roles.iter().any(|r| r.name != s.role) {
        errors.push("Header 'to' is 'all', but there is no other role to send to.".to_string());
    }
    let mut seen: Vec<String> = Vec::new();
    for raw in d.get_all("artifact") {
        match artifacts::stamp(&wt.root, raw) {
            Ok(a) if seen.contains(&a.path) => {
                errors.push(format!("Duplicate artifact '{}'.", a.path));
            }
            Ok(a) => {
                seen.push(a.path.clone());
                c.artifacts.push(a);
            }
            Err(e) => errors.push(e),
        }
    }
    c
}

/// An answer against the clarify it answers: a clarify, in-range choices,
/// one choice unless `allow_multiple`, text only if `allow_custom`.
fn answer_checks(d: &Draft, parent: Option<&Item>, given: bool, errors: &mut Vec<String>) {
    let Some(p) = parent else {
        if !given {
            errors.push("Missing required header 'in_reply_to' for answer.".to_string());
        }
        return;
    };
    let pid = p.header("id").unwrap_or("");
    let kind = p.header("type").unwrap_or("unknown");
    if kind != types::CLARIFY.name {
        errors.push(format!(
            "Header 'in_reply_to' must name a clarify for answer; '{pid}' is a {kind}."
        ));
        return;
    }
    let options = fields::options(&p.msg.body);
    if let Some(list) = d.get("choices").and_then(fields::parse_choices) {
        for n in &list {
            if *n == 0 || *n > options.len() {
                errors.push(format!(
                    "Choice {n} is not an option of clarify '{pid}'; it has {} options.",
                    options.len()
                ));
            }
        }
        if list.len() > 1 && !fields::flag(&p.msg, "allow_multiple") {
            errors.push(format!(
                "Only one choice is allowed for clarify '{pid}' (allow_multiple: no); got {}.",
                list.len()
            ));
        }
    }
    let text = d.body.as_deref().is_some_and(|b| !fields::blank(b));
    if text && !fields::flag(&p.msg, "allow_custom") {
        errors.push(format!(
            "Custom text is not allowed for clarify '{pid}' (allow_custom: no); choose an option."
        ));
    }
}

/// An answer's body: the chosen options (`<n>. <option>`, one per line),
/// then a blank line and the answer's own text.
fn answer_body(d: &Draft, parent: Option<&Item>) -> String {
    let options = parent
        .map(|p| fields::options(&p.msg.body))
        .unwrap_or_default();
    let mut body = String::new();
    let choices = d
        .get("choices")
        .and_then(fields::parse_choices)
        .unwrap_or_default();
    for n in &choices {
        let o = options.get(n.wrapping_sub(1)).copied().unwrap_or("");
        body.push_str(&format!("{n}. {o}\n"));
    }
    let text = d.body.as_deref().unwrap_or("");
    if !fields::blank(text) {
        if !body.is_empty() {
            body.push('\n');
        }
        body.push_str(text);
    }
    body
}

/// Validates a parsed draft for `s` and queues it: the path `swarm-handoff`
/// and `swarm answer` share. `shown` names the draft in the report.
pub fn submit(s: &Sender, d: &Draft, shown: &str) -> Result<Queued> {
    let allowed = s.config.allowed_types(&s.role);
    let is_role = |r: &str| s.roles.find(r).is_some();
    let policy = rules::Policy {
        is_role: &is_role,
        allowed: &allowed,
    };
    let mut errors = d.errors.clone();
    let mut canonical = None;
    let repo = s.at.worktree.root.clone();
    errors.extend(rules::validate_with(d, &policy, &mut |c| {
        canonical = Some(gitcheck::canonical_commit(&repo, c)?);
        Ok(())
    }));
    let ty = d.get("type").unwrap_or_default().to_string();
    let rule = types::type_rule(&ty).filter(|r| allowed.contains(&r.name));
    let ctx = match rule {
        Some(rule) => context(s, d, rule, &mut errors),
        None => Context::default(),
    };
    if !errors.is_empty() {
        return Err(Error::invalid(Token::HandoffInvalid, shown, errors));
    }
    let Some(rule) = rule else {
        return Err(Error::env("internal: a valid draft without a type rule"));
    };
    if let Some(id) = d.get("discussion") {
        // A round-robin turn: only the expected speaker may send.
        if let Some(r) = crate::forum::discussion::refusal(&s.at.project, id, &s.role)? {
            return Err(Error::refused(r.token, r.detail, vec![]));
        }
    }

    let sender = &s.role;
    let to = d.get("to").unwrap_or_default().to_string();
    let priority = d.get("priority").unwrap_or_default().to_string();
    let recipients: Vec<String> = to.split(',').map(str::to_string).collect();
    let wt = &s.at.worktree;
    fsx::ensure_dirs(&wt.send_dirs()).at(wt.handoffs())?;
    let now = clock::now();
    let seq = sequence::next(wt)?;
    let id = grammar::message_id(now, seq, sender);
    let mut msg = Message::default();
    msg.set("id", &id);
    msg.set("from", sender);
    msg.set("to", recipients.join(","));
    msg.set("priority", &priority);
    msg.set("type", &ty);
    let body = if ty == types::GIT_HANDOFF.name {
        let commit = canonical.unwrap_or_default();
        msg.set("role", sender);
        msg.set("task", d.get("task").unwrap_or_default());
        msg.set("commit", &commit);
        format!("{BODY_PREAMBLE}\n\nmerge_and_process {sender} {commit}\n")
    } else if ty == types::NOTE.name {
        let m = d.get("message").unwrap_or_default();
        msg.set("message", m);
        format!("{BODY_PREAMBLE}\n\n{m}\n")
    } else if ty == types::ANSWER.name {
        answer_body(d, ctx.parent.as_ref())
    } else {
        d.body.clone().unwrap_or_default()
    };
    msg.set("created_at", clock::iso(now));
    for name in rule.own {
        if let Some(v) = d.get(name) {
            let v = if *name == "choices" {
                fields::parse_choices(v)
                    .unwrap_or_default()
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            } else {
                v.to_string()
            };
            if msg.get(name).is_none() {
                msg.set(name, v);
            }
        }
    }
    for name in ["cc", "wake", "discussion"] {
        if let Some(v) = d.get(name) {
            msg.set(name, v);
        }
    }
    if let Some(p) = &ctx.parent {
        msg.set("in_reply_to", p.header("id").unwrap_or_default());
    }
    if let Some(t) = &ctx.thread {
        msg.set("thread", t);
    }
    if ctx.hop > 0 {
        msg.set("hop", ctx.hop.to_string());
    }
    let texts: Vec<&str> = ["subject", "message", "question", "reason"]
        .iter()
        .filter_map(|h| d.get(h))
        .chain(d.body.as_deref())
        .collect();
    let mentions = fields::mentions(&texts, sender, &is_role);
    if !mentions.is_empty() {
        msg.set("mentions", mentions.join(","));
    }
    if let Ok(Some(session)) = crate::forum::session::current(&s.at.project) {
        msg.set("session", session.id);
    }
    for a in &ctx.artifacts {
        msg.push("artifact", a.header());
    }
    msg.body = body;

    let name = grammar::file_name(&priority, &id, &recipients);
    let dest = wt.outbox().join(&name);
    fsx::publish(&wt.outbox_tmp(), &dest, msg.render().as_bytes()).at(&dest)?;
    Ok(Queued {
        path: dest,
        id,
        sequence: grammar::format_seq(seq),
        kind: ty,
        to: recipients,
        priority,
        in_reply_to: msg.get("in_reply_to").map(str::to_string),
        thread: ctx.thread,
        hop: ctx.hop,
        artifacts: ctx.artifacts,
    })
}

/// The canonical folder holding `path` (every symlinked folder on the way
/// resolved), or None when it cannot be resolved.
fn real_folder(path: &Path) -> Option<PathBuf> {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .canonicalize()
        .ok()
}

fn inside_any(p: &Path, roots: &[&Path]) -> bool {
    roots
        .iter()
        .filter_map(|r| r.canonicalize().ok())
        .any(|r| p.starts_with(r))
}

/// A draft must resolve inside the project: O_NOFOLLOW guards only the last
/// component, and `dirlink/secret.txt` through a symlinked folder would
/// otherwise read (and then delete) a file anywhere. Returns the resolved
/// path to read, so a folder swapped for a link after the check is not
/// followed either. A draft that is itself a symlink is checked by
/// [`read_symlinked_draft`] (None here).
fn resolve_draft(path: &Path, at: &Located, shown: &str) -> Result<Option<PathBuf>> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Ok(None);
    }
    let real = path
        .canonicalize()
        .map_err(|e| Error::env(format!("Cannot read draft {shown}: {e}")))?;
    if !inside_any(&real, &[&at.worktree.root, &at.project.root]) {
        return Err(Error::env(format!(
            "Draft file {shown} resolves to {} outside the project; refusing to read it.",
            real.display()
        )));
    }
    Ok(Some(real))
}

fn read_symlinked_draft(path: &Path, at: &Located, shown: &str) -> Result<Vec<u8>> {
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
        )));
    }
    fsx::read_bounded(&target, draft::MAX_DRAFT_BYTES as u64)
        .map_err(|e| Error::env(format!("Cannot read draft {shown}: {e}")))
}

/// Deletes the draft after the queued line was printed (best effort: the
/// handoff is queued whatever happens here, §15.23).
pub fn discard_draft(draft_arg: &str, cwd: &Path) -> Option<String> {
    let p = if Path::new(draft_arg).is_absolute() {
        PathBuf::from(draft_arg)
    } else {
        cwd.join(draft_arg)
    };
    // Only a file in the sender's own worktree is ours to delete (a symlink
    // there is removed as a link; its target is never touched).
    let mine = root::locate(cwd)
        .ok()
        .zip(real_folder(&p))
        .is_some_and(|(at, dir)| inside_any(&dir, &[&at.worktree.root]));
    if !mine {
        return Some(format!(
            "warning: handoff queued; the draft {} is outside your worktree and was left in place",
            p.display()
        ));
    }
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
