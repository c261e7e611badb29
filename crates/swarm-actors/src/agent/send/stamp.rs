//! What a queued message says besides its id, sender, recipients,
//! priority and type: the headers only its type sets and its body, the
//! fields its type's rule owns, and where it stands among the others
//! (reply, thread, trace, hop, mentions, session, artifacts). The
//! invariant: every header comes from a checked draft or from the
//! sender's own context, set in the order SwarmForge's files have them.

use super::{answer_body, Sender, Valid, BODY_PREAMBLE};
use crate::protocol::fields;
use crate::protocol::header::{names, Message};
use crate::protocol::types;

/// The headers only its type sets, and the body: a `git_handoff`'s role,
/// task, commit and card stamps with SwarmForge's merge line, a `note`'s
/// message, an `answer`'s quoted question; any other type's own body.
pub(super) fn typed_body(
    s: &Sender,
    v: &Valid,
    msg: &mut Message,
    recipients: &[String],
    batch_ids: Option<&[String]>,
) -> String {
    let (d, sender) = (&v.d, &s.role);
    if v.ty == types::GIT_HANDOFF.name {
        let commit = v
            .canonical
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default();
        msg.set(names::ROLE, sender);
        let task = d.get(names::TASK).unwrap_or_default();
        msg.set(names::TASK, task);
        msg.set(names::COMMIT, &commit);
        let to: Vec<&str> = recipients.iter().map(String::as_str).collect();
        if let Some((kind, how)) = v.board.as_ref().and_then(|b| b.stamp(task, sender, &to)) {
            msg.set(crate::board::CARD_TYPE, kind);
            msg.set(crate::board::DELIVERY_KIND, how);
        }
        if let Some(ids) = batch_ids {
            msg.set(
                crate::board::BATCH_TASK_IDS,
                crate::board::batch_task_ids(ids),
            );
        }
        format!("{BODY_PREAMBLE}\n\nmerge_and_process {sender} {commit}\n")
    } else if v.ty == types::NOTE.name {
        let m = d.get(names::MESSAGE).unwrap_or_default();
        msg.set(names::MESSAGE, m);
        format!("{BODY_PREAMBLE}\n\n{m}\n")
    } else if v.ty == types::ANSWER.name {
        answer_body(d, v.ctx.parent.as_ref())
    } else {
        d.body.clone().unwrap_or_default()
    }
}

/// The draft's fields its type's rule owns (choices as their numbers) that
/// the type-specific headers did not set, then `cc`, `wake`, `discussion`.
pub(super) fn copy_own_fields(v: &Valid, msg: &mut Message) {
    let d = &v.d;
    for name in v.rule.own_headers() {
        if let Some(val) = d.get(name) {
            let val = if name == names::CHOICES {
                fields::parse_choices(val)
                    .unwrap_or_default()
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            } else {
                val.to_string()
            };
            if msg.get(name).is_none() {
                msg.set(name, val);
            }
        }
    }
    for name in [names::CC, names::WAKE, names::DISCUSSION] {
        if let Some(val) = d.get(name) {
            msg.set(name, val);
        }
    }
}

/// Where the message stands among the others: what it replies to, its
/// thread, trace and hop, whom its texts mention, the session it is sent
/// in, and its artifacts.
pub(super) fn stamp_context(s: &Sender, v: &Valid, msg: &mut Message, id: &str) {
    let (d, ctx) = (&v.d, &v.ctx);
    if let Some(p) = &ctx.parent {
        msg.set(names::IN_REPLY_TO, p.msg.id().unwrap_or_default());
    }
    if let Some(t) = &ctx.thread {
        msg.set(names::THREAD, t);
    }
    // Only where traces are exported: a swarm without `otel:` keeps
    // SwarmForge's exact file, and its traces are derived the same way.
    if s.config.otel.endpoint.is_some() {
        msg.set(
            names::TRACE_ID,
            crate::telemetry::trace::for_new(
                ctx.parent.as_ref().map(|p| &p.msg),
                ctx.thread.as_deref(),
                id,
            ),
        );
    }
    if ctx.hop > 0 {
        msg.set(names::HOP, ctx.hop.to_string());
    }
    let is_role = |r: &str| s.roles.find(r).is_some();
    let texts: Vec<&str> = [
        names::SUBJECT,
        names::MESSAGE,
        names::QUESTION,
        names::REASON,
    ]
    .iter()
    .filter_map(|h| d.get(*h))
    .chain(d.body.as_deref())
    .collect();
    let mentions = fields::mentions(&texts, &s.role, &is_role);
    if !mentions.is_empty() {
        msg.set(names::MENTIONS, mentions.join(","));
    }
    if let Ok(Some(session)) = crate::forum::session::current(&s.at.project) {
        msg.set(names::SESSION, session.id);
    }
    for a in &ctx.artifacts {
        msg.push(names::ARTIFACT, a.header());
    }
}
