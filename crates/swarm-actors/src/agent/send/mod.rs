//! `swarm-handoff <draft>`: validate a draft and queue it in the sender's
//! outbox (docs/protocol.md §7.1), published atomically (§8 of that file).
//! The reply context a message is stamped with is in `context`; finding,
//! checking and removing the draft file in `draft_file`.

pub mod audit_gate;
mod context;
mod draft_file;
mod stamp;

pub use draft_file::{discard_draft, shown_path};

use crate::protocol::header::names;
use context::{answer_body, context, Context};
use stamp::{copy_own_fields, stamp_context, typed_body};

use std::path::{Path, PathBuf};

use crate::agent::artifacts;
use crate::board::lookup::SendBoard;
use crate::error::{Error, Result, Token};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::commit_id::CommitId;
use crate::protocol::config::Config;
use crate::protocol::draft::{self, Draft};
use crate::protocol::gitcheck;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::protocol::roles::{Role, Roles};
use crate::protocol::root::{self, Located};
use crate::protocol::rules;
use crate::protocol::store;
use crate::protocol::swarm::Swarm;
use crate::protocol::types;

use crate::protocol::draft::BODY_PREAMBLE;

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
    /// Merge-only copies queued with it (`back-one` / `back-all`; crates/swarm-records/src/board/copies.rs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<PathBuf>,
    /// The worktree the send ran in ([`Sender::home`]): where its draft
    /// may be deleted.
    #[serde(skip)]
    pub worktree: PathBuf,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Canonical paths compare equal even through symlinked temp dirs.
pub fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Checks that the acting role works in the located worktree, so a message is
/// never queued where the daemon will not look (docs/protocol.md §3).
pub fn check_role_worktree(role: &Role, at: &mut Located) -> Result<()> {
    if same_dir(&role.worktree_path, &at.worktree.root) {
        return Ok(());
    }
    // A person with a state-only inbox works in the project root; their
    // commands act on that inbox (protocol::people).
    if role.is_human()
        && crate::protocol::people::is_person_folder(&role.worktree_name)
        && !at.in_role_worktree()
    {
        at.worktree = crate::protocol::layout::Worktree::new(&role.worktree_path);
        return Ok(());
    }
    Err(Error::bad_input(format!(
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
    /// The worktree the command runs in (a person's is the project root,
    /// while `at` names their inbox folder): where a draft is theirs.
    pub home: PathBuf,
    pub roles: Roles,
    pub config: Config,
}

impl Sender {
    /// `role` sending from its own worktree (`swarm answer` acts for the
    /// role that received the clarify).
    pub fn as_role(project: &crate::protocol::layout::Project, role: &str) -> Result<Sender> {
        Sender::as_role_in(Swarm::new(project.clone()), role)
    }

    /// [`Sender::as_role`] in a loaded swarm (`swarm answer` read it to
    /// find the clarify), which the sender keeps.
    pub fn as_role_in(swarm: Swarm, role: &str) -> Result<Sender> {
        let roles = swarm.roles()?;
        let project = &swarm.project;
        let Some(r) = roles.find(role) else {
            return Err(Error::not_found(format!(
                "Unknown sender role: {role}{}",
                roles.unknown_hint(&project.roles_tsv())
            )));
        };
        let wt = r.worktree_in(&project.root);
        let (project, roles, config) = swarm.into_parts()?;
        Ok(Sender {
            role: role.to_string(),
            home: wt.clone(),
            at: Located {
                worktree: crate::protocol::layout::Worktree::new(wt),
                project,
            },
            roles,
            config,
        })
    }

    /// `role` sending from the worktree `cwd` is in: the checks every send
    /// makes before reading a draft (known role, its own worktree), and the
    /// project's fsync setting applied.
    pub fn locate(role: &str, cwd: &Path) -> Result<Sender> {
        let mut at = root::locate(cwd)?;
        let swarm = Swarm::new(at.project.clone());
        let roles = swarm.roles()?;
        let Some(r) = roles.find(role) else {
            return Err(Error::not_found(format!(
                "Unknown sender role: {role}{}",
                roles.unknown_hint(&at.project.roles_tsv())
            )));
        };
        let home = at.worktree.root.clone();
        check_role_worktree(r, &mut at)?;
        let (_, roles, config) = swarm.into_parts()?;
        fsx::set_fsync(config.daemon.fsync);
        Ok(Sender {
            role: role.to_string(),
            home,
            at,
            roles,
            config,
        })
    }

    fn is_human(&self) -> bool {
        self.roles.find(&self.role).is_some_and(Role::is_human)
    }
}

/// Everything `swarm-handoff` does before printing `HANDOFF QUEUED:` (or,
/// behind the audit gate, `AUDIT_REQUIRED`).
pub fn queue(draft_arg: &str, cwd: &Path) -> Result<Sent> {
    let shown = shown_path(draft_arg);
    let draft_path = if Path::new(draft_arg).is_absolute() {
        PathBuf::from(draft_arg)
    } else {
        cwd.join(draft_arg)
    };
    if !draft_path.is_file() {
        // SwarmForge's words for a missing draft; a folder is named as one.
        if draft_path.is_dir() {
            return Err(Error::not_found(format!(
                "Draft file {} is a folder, not a file\n  hint: write the draft into a file (e.g. {}/draft.txt) and pass that file",
                if shown.is_empty() { "." } else { &shown },
                if shown.is_empty() { "." } else { shown.trim_end_matches('/') }
            )));
        }
        return Err(Error::not_found(format!("Draft file not found: {shown}")));
    }
    let s = Sender::locate(&root::acting_role()?, cwd)?;
    let at = &s.at;

    let read_path = draft_file::real_draft(&draft_path, at, &shown)?;
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
        Err(e) => return Err(Error::env(format!("Cannot read draft {shown}: {e}"))),
    };
    let parsed = draft::parse_bytes(&bytes);
    if std::str::from_utf8(&bytes).is_err() {
        // Nothing was parsed, so "missing header" errors would only mislead.
        return Err(Error::invalid(Token::HandoffInvalid, shown, parsed.errors));
    }
    submit_gated(&s, &parsed, &shown)
}

/// What `swarm-handoff` did with a draft.
#[derive(Debug)]
pub enum Sent {
    /// Queued; behind the audit gate, the sender's current item was then
    /// finished (`Some`: what that completion did, or why it failed).
    Queued(Box<Queued>, Option<Result<crate::agent::queue::Done>>),
    /// The audit gate held a `git_handoff` back: nothing was queued.
    AuditRequired(audit_gate::Challenge),
}

/// Validates a parsed draft for `s` and queues it: the path `swarm-handoff`
/// and `swarm answer` share. `shown` names the draft in the report.
pub fn submit(s: &Sender, d: &Draft, shown: &str) -> Result<Queued> {
    let v = validate(s, d, shown)?;
    publish(s, v)
}

/// [`submit`] behind the audit gate (`audit_gate: true`): a `git_handoff`
/// is queued only by a second, unchanged call (agent::send::audit_gate).
pub fn submit_gated(s: &Sender, d: &Draft, shown: &str) -> Result<Sent> {
    let v = validate(s, d, shown)?;
    if !s.config.audit_gate || v.ty != types::GIT_HANDOFF.name {
        return publish(s, v).map(|q| Sent::Queued(Box::new(q), None));
    }
    let commit = v
        .canonical
        .as_ref()
        .map(CommitId::to_string)
        .unwrap_or_default();
    let recipients: Vec<String> = grammar::role_list(v.d.to())
        .into_iter()
        .map(str::to_string)
        .collect();
    let artifacts: Vec<String> = v.ctx.artifacts.iter().map(|a| a.header()).collect();
    let task = v.d.get(names::TASK).unwrap_or_default().to_string();
    let carried = carried_cards(s).unwrap_or_default();
    let mut c = audit_gate::candidate(
        &s.role,
        &v.d,
        &v.ty,
        &recipients,
        v.d.priority().unwrap_or_default(),
        &commit,
        &artifacts,
    );
    c.batch_task_ids = carried.clone();
    let gate = audit_gate::check(&s.at.worktree, &c)?;
    if !gate.passed() {
        // Upstream counts each challenge on every card it covers
        // (`increment-audit` for each of the task and `batch_task_ids`).
        let mut cards = vec![task.clone()];
        cards.extend(carried.into_iter().filter(|t| *t != task));
        for card in &cards {
            if let Err(e) = crate::forum::requests::count_audit(&s.at.project, card) {
                eprintln!("swarm-handoff: the audit count of card {card} was not raised: {e}");
            }
        }
        return Ok(Sent::AuditRequired(audit_gate::Challenge { task, commit }));
    }
    let q = publish(s, v)?;
    gate.queued()?;
    Ok(Sent::Queued(Box::new(q), finish_current(s)))
}

/// After the unchanged second call queued the handoff, the sender's current
/// item is finished, as today's SwarmForge's helper runs
/// `done_with_current.sh` then (`complete-current-after-git-handoff!`):
/// completed, then `MAIL_WAITING` or `NO_TASK`, nothing taken. None when
/// nothing is in process.
fn finish_current(s: &Sender) -> Option<Result<crate::agent::queue::Done>> {
    let wt = &s.at.worktree;
    let max = store::copy_limit(s.config.limits.max_file_bytes);
    if crate::agent::queue::current_items(wt, max).is_empty() {
        return None;
    }
    let mode = match s.roles.find(&s.role).map(Role::receive_mode) {
        Some(Ok(m)) => m,
        _ => crate::protocol::roles::ReceiveMode::Task,
    };
    let inbox = crate::agent::queue::Inbox::new(wt, s.config.limits.max_file_bytes);
    Some(inbox.done_announcing(mode, None))
}

/// A draft that passed every check, with what the checks found.
struct Valid<'a> {
    d: Draft,
    ty: String,
    rule: &'static types::TypeRule,
    ctx: Context,
    canonical: Option<CommitId>,
    /// A `git_handoff`'s board, when the project declares cards.
    board: Option<SendBoard<'a>>,
}

/// Every check of a draft for `s`; nothing is written.
fn validate<'a>(s: &'a Sender, d: &Draft, shown: &str) -> Result<Valid<'a>> {
    let filled = with_head_commit(d, &s.at.worktree.root);
    let d = filled.as_ref().unwrap_or(d);
    let allowed = s.config.allowed_types(&s.role);
    let seats = &s.config.seats;
    let is_role = |r: &str| s.roles.find(r).is_some() && !seats.is_leaving(r);
    let policy = rules::Policy {
        is_role: &is_role,
        allowed: &allowed,
    };
    let mut errors = d.errors.clone();
    errors.extend(crate::protocol::lineup::send_refusals(seats, d));
    let mut canonical = None;
    let repo = s.at.worktree.root.clone();
    errors.extend(rules::validate_with(d, &policy, &mut |c| {
        // The validation groups collect texts: the refusal is said as one.
        canonical = Some(gitcheck::canonical_commit(&repo, c)?);
        Ok(())
    }));
    let ty = d.type_name().unwrap_or_default().to_string();
    // A `git_handoff`'s cards: the board read once for the task, every
    // carried card and the stamp (`publish`).
    let board = (ty == types::GIT_HANDOFF.name)
        .then(|| SendBoard::load(&s.at.project, &s.roles, &s.config))
        .flatten();
    if ty == types::GIT_HANDOFF.name {
        if let Some(t) = d.get(names::TASK) {
            if let Some(b) = &board {
                errors.extend(b.refusal(t));
                for c in carried_cards(s).unwrap_or_default() {
                    if c != t {
                        errors.extend(b.carried_refusal(&c));
                    }
                }
            }
            if let Some(c) = &canonical {
                errors.extend(crate::agent::task_doc::refusal(
                    &s.at.project.root,
                    &repo,
                    t,
                    c,
                ));
            }
        }
    }
    let rule = types::type_rule(&ty).filter(|r| allowed.contains(&r.name));
    let ctx = match rule {
        Some(rule) => context(s, d, rule, &mut errors),
        None => Context::default(),
    };
    if !errors.is_empty() {
        return Err(Error::invalid(Token::HandoffInvalid, shown, errors));
    }
    let Some(rule) = rule else {
        return Err(Error::internal(
            "internal: a valid draft without a type rule",
        ));
    };
    if let Some(id) = d.discussion() {
        // A round-robin turn: only the expected speaker may send.
        if let Some(r) = crate::forum::discussion::refusal(&s.at.project, id, &s.role)? {
            return Err(Error::refused(r.token, r.detail, vec![]));
        }
    }
    Ok(Valid {
        d: d.clone(),
        ty,
        rule,
        ctx,
        canonical,
        board,
    })
}

/// Queues a validated draft: stamps it and publishes it in the outbox.
fn publish<'a>(s: &'a Sender, v: Valid<'a>) -> Result<Queued> {
    let to = v.d.to().unwrap_or_default().to_string();
    let priority = v.d.priority().unwrap_or_default().to_string();
    let recipients: Vec<String> = grammar::role_list(Some(&to))
        .into_iter()
        .map(str::to_string)
        .collect();
    let wt = &s.at.worktree;
    let batch_ids = (v.ty == types::GIT_HANDOFF.name)
        .then(|| carried_cards(s))
        .flatten();
    let queued = store::enqueue(wt, &s.role, |id, now| {
        let mut msg = Message::default();
        msg.set(names::ID, id);
        msg.set(names::FROM, &s.role);
        msg.set(names::TO, recipients.join(","));
        msg.set(names::PRIORITY, &priority);
        msg.set(names::TYPE, &v.ty);
        let body = typed_body(s, &v, &mut msg, &recipients, batch_ids.as_deref());
        msg.set(names::CREATED_AT, clock::iso(now));
        copy_own_fields(&v, &mut msg);
        stamp_context(s, &v, &mut msg, id);
        msg.body = body;
        msg
    })?;
    let (dest, id, seq, msg) = (queued.path, queued.id, queued.seq, queued.msg);
    // The handoff is queued; a copy that cannot be made is said, not turned
    // into a failed send (which would make the agent send twice).
    let copies = if v.ty == types::GIT_HANDOFF.name {
        crate::board::copies::queue(&s.at.project, wt, &s.role, &msg).unwrap_or_else(|e| {
            eprintln!("swarm-handoff: merge-only copies not queued: {e}");
            Vec::new()
        })
    } else {
        Vec::new()
    };
    Ok(Queued {
        copies,
        worktree: s.home.clone(),
        path: dest,
        id,
        sequence: grammar::format_seq(seq),
        kind: v.ty,
        to: recipients,
        priority,
        in_reply_to: msg.in_reply_to().map(str::to_string),
        thread: v.ctx.thread,
        hop: v.ctx.hop,
        artifacts: v.ctx.artifacts,
    })
}

/// The cards a `git_handoff` of `s` carries when its current work names
/// more than one (a batch of several cards, or an item in process that
/// carried `batch_task_ids` itself), each once, in queue order: as
/// upstream's `swarm_handoff.bb` (`with-batch-task-ids`) stamps them, so the
/// board moves every card the one result covers besides its `task`
/// (docs/swarmforge-compat.md §4). None: one card or none.
fn carried_cards(s: &Sender) -> Option<Vec<String>> {
    let max = store::copy_limit(s.config.limits.max_file_bytes);
    let mut ids: Vec<String> = Vec::new();
    for item in crate::agent::queue::current_items(&s.at.worktree, max) {
        for c in crate::board::cards_named(&item.msg) {
            if !ids.contains(&c) {
                ids.push(c);
            }
        }
    }
    (ids.len() > 1).then_some(ids)
}

/// A `git_handoff` draft without `commit` names the sender worktree's HEAD,
/// as SwarmForge's `swarm_handoff.sh` fills it today; a commit the draft
/// names is kept (docs/swarmforge-compat.md §2). None: nothing to fill (or
/// no readable HEAD, which the validation then reports as the missing commit).
fn with_head_commit(d: &Draft, worktree: &Path) -> Option<Draft> {
    if d.type_name() != Some(types::GIT_HANDOFF.name) || d.get(names::COMMIT).is_some() {
        return None;
    }
    let head = gitcheck::head_commit(worktree)?;
    let mut filled = d.clone();
    filled.fields.push((names::COMMIT.to_string(), head));
    Some(filled)
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
