//! `swarm answer <clarify-id> --choice N [--choice M] [--text T]`: a person
//! answers an open clarify (docs/message-model.md, "`swarm answer`").
//!
//! The answer is sent as the role that received the clarify, through the same
//! path as `swarm-handoff` (a draft, validated against the clarify's options,
//! `allow_multiple` and `allow_custom`), with `in_reply_to: <clarify id>`;
//! then the clarify's copy in that role's inbox is completed. Both happen
//! under that inbox's lock, so two people answering at once cannot both
//! answer.
//!
//! Only a person answers as a human role, and an agent only as itself
//! ([`Caller`], docs/security.md "Who is calling"): otherwise an agent could
//! ask the person a blocking question and answer it in the person's name.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::agent::caller::Caller;
use crate::agent::queue::{self, Inbox};
use crate::agent::send::{self, Queued, Sender};
use crate::error::Result;
use crate::error::{Error, Token};
use crate::fsx;
use crate::protocol::draft;
use crate::protocol::fields;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::swarm::Swarm;
use crate::protocol::trail::{Original, Place, Scope, Trail};
use crate::protocol::types;
use crate::text::escape;

/// What `swarm answer` did.
#[derive(Debug, Serialize)]
pub struct Answered {
    /// The clarify answered.
    pub clarify: String,
    /// The role the answer was sent as.
    pub role: String,
    pub queued: Queued,
    /// Where the clarify's copy went (`None`: it was completed already).
    pub completed: Option<PathBuf>,
}

/// The draft `swarm answer` sends.
fn draft_text(
    clarify: &crate::agent::queue::Item,
    id: &str,
    choices: &[usize],
    text: Option<&str>,
) -> String {
    let to = clarify.msg.sender().unwrap_or("");
    let priority = clarify
        .msg
        .priority()
        .filter(|p| fields::valid_priority(p))
        .unwrap_or("50");
    let mut d = format!("type: answer\nto: {to}\npriority: {priority}\nin_reply_to: {id}\n");
    if !choices.is_empty() {
        let list: Vec<String> = choices.iter().map(usize::to_string).collect();
        d.push_str(&format!("choices: {}\n", list.join(",")));
    }
    d.push('\n');
    if let Some(t) = text {
        d.push_str(t);
        d.push('\n');
    }
    d
}

/// Answers clarify `id` in `project`. Refusals (a choice that is not an
/// option, a second choice without `allow_multiple`, text without
/// `allow_custom`, a clarify answered or withdrawn already) exit 2; a clarify
/// that reached no inbox exits 1. `caller` must be allowed to act as the
/// clarify's recipient (exit 2: `PERSON_ONLY` for a human role, else
/// `NOT_YOUR_CLARIFY`).
pub fn answer(
    project: &Project,
    id: &str,
    choices: &[usize],
    text: Option<&str>,
    caller: &Caller,
) -> Result<Answered> {
    answer_in(Swarm::new(project.clone()), id, choices, text, caller)
}

/// [`answer`] in a loaded swarm, which the answer's sender keeps (roles.tsv
/// and swarm.yaml read once for the whole answer).
pub fn answer_in(
    swarm: Swarm,
    id: &str,
    choices: &[usize],
    text: Option<&str>,
    caller: &Caller,
) -> Result<Answered> {
    if !crate::protocol::grammar::valid_message_id(id) {
        return Err(Error::bad_input(format!(
            "'{}' is not a message id.",
            escape(id)
        )));
    }
    let project = &swarm.project.clone();
    let roles = swarm.roles()?;
    let config = swarm.config()?;
    fsx::set_fsync(config.daemon.fsync);
    let max = config.limits.max_file_bytes;
    let Some(copy) = clarify_copy(roles, project, id, max) else {
        return Err(Error::not_found(format!(
            "No copy of {id} in any inbox: it is not delivered yet, or no such message exists.\n  hint: `swarm receipts {id}` shows where it is"
        )));
    };
    let kind = copy.msg.type_name().unwrap_or("unknown");
    if kind != types::CLARIFY.name {
        return Err(Error::refused(
            Token::NotAClarify,
            format!("{id} is a {}, not a clarify.", escape(kind)),
            vec![copy.path.clone()],
        ));
    }
    let role = copy
        .msg
        .recipient()
        .or_else(|| copy.msg.to())
        .unwrap_or("")
        .to_string();
    check_caller(roles, id, &role, caller, &copy.path)?;
    let sender = Sender::as_role_in(swarm, &role)?;
    let d = draft::parse(&draft_text(&copy, id, choices, text));
    let shown = format!("swarm answer {id}");
    let inbox = Inbox::new(&sender.at.worktree, max);
    inbox.with_lock(|ib| -> Result<Answered> {
        if let Some(by) = settled_by(&sender, id)? {
            return Err(Error::refused(
                Token::ClarifyClosed,
                format!("{id} is already answered or withdrawn by {by}."),
                vec![],
            ));
        }
        let queued = send::submit(&sender, &d, &shown)?;
        let completed = ib.complete_copy_locked(id).map_err(|e| {
            Error::env(format!(
                "The answer is queued at {}, but the clarify's copy could not be completed: {e}",
                queued.path.display()
            ))
        })?;
        Ok(Answered {
            clarify: id.to_string(),
            role: role.clone(),
            queued,
            completed,
        })
    })
}

/// Refuses an agent answering as a person (`PERSON_ONLY`), or as another
/// agent (`NOT_YOUR_CLARIFY`).
fn check_caller(
    roles: &Roles,
    id: &str,
    role: &str,
    caller: &Caller,
    copy: &std::path::Path,
) -> Result<()> {
    let human = roles.find(role).is_some_and(|r| r.is_human());
    let caller = caller.clone().people_as_persons(roles);
    if caller.may_act_as(role) {
        return Ok(());
    }
    if human {
        // A person's decision, refused as every other one is (`swarm inbox
        // done` for a person's item says the same).
        return caller.require_acting_as(role, true, &format!("answering {id}"));
    }
    let whose = format!("only {} answers it", escape(role));
    Err(Error::refused(
        Token::NotYourClarify,
        format!(
            "{id} was asked of {}; {whose}. This is {} (SWARMFORGE_ROLE in this process or its parents).",
            escape(role),
            caller.describe()
        ),
        vec![copy.to_path_buf()],
    ))
}

/// Ids of the clarifies an `answer` or `close` (queued or delivered) speaks
/// to, with the id of the first such message.
pub fn settled(originals: &[Original]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for o in originals {
        if o.place == Place::Failed {
            continue;
        }
        let kind = o.msg.type_name().unwrap_or("");
        if kind != types::ANSWER.name && kind != types::CLOSE.name {
            continue;
        }
        if let Some(r) = o.msg.in_reply_to() {
            out.entry(r.to_string())
                .or_insert_with(|| o.id().to_string());
        }
    }
    out
}

/// Whether clarify `id` is still open, and if not, what settled it.
/// Read under the inbox's lock, so the trail is read again here; the
/// table and config are the sender's, read once for the answer.
fn settled_by(s: &Sender, id: &str) -> Result<Option<String>> {
    let t = Trail::load_with(&s.at.project, &s.roles, &s.config, &Scope::originals())?;
    Ok(settled(&t.originals).remove(id))
}

/// A human role's copy of clarify `id`, wherever it sits in its inbox.
pub fn clarify_copy(
    roles: &Roles,
    project: &Project,
    id: &str,
    max_bytes: u64,
) -> Option<queue::Item> {
    let mut seen: Vec<PathBuf> = Vec::new();
    for r in &roles.roles {
        let root = r.worktree_in(&project.root);
        if seen.contains(&root) {
            continue;
        }
        seen.push(root.clone());
        if let Some(item) = queue::find_copy(&Worktree::new(root), id, max_bytes) {
            return Some(item);
        }
    }
    None
}
