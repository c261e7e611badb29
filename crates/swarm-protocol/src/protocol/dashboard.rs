//! SwarmForge's dashboard request folders (docs/swarmforge-compat.md §5):
//! `.swarmforge/dashboard/clarifications/{pending,done}/<id>.request` and
//! `.swarmforge/dashboard/requests/{pending,done}/<id>.request` (chat), in
//! upstream's file shape (pack_web.bb `render-clarification`,
//! `write-chat-request!`): headers `id`, `status`, `role` (clarifications),
//! `created_at`, `response` (when answered; newlines written `\n`), a
//! blank line, the question or the chat text.
//!
//! One truth: the messages are it. A clarify to a person and a person's
//! post to the master role are messages like any other (delivered,
//! answered with `swarm answer`, replied to); these files are *derived*
//! from them ([`derive`]) and rewritten by handoffd after a pass that
//! delivered something ([`sync`]), so a clarify shows in `pending/` once
//! delivered and moves to `done/` with its `response` once the answer is
//! delivered; a chat post's reply lands in `requests/done/`, where
//! forgelet-bridge reads replies. Nothing is read back from these files:
//! a file that says other than the messages ([`disagreements`]) is
//! reported NOT IN STEP by `swarm status` and `swarm audit --check`, and a
//! `done/` file the messages do not settle (another tool's answer) is left
//! alone, never overwritten.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::fsx;
use crate::protocol::fields;
use crate::protocol::header::{names, Message};
use crate::protocol::layout::Project;
use crate::protocol::roles::{Role, Roles};
use crate::protocol::swarm::Swarm;
use crate::protocol::trail::{Place, Trail};
use crate::protocol::{grammar, types};

/// A request file's suffix.
const REQUEST: &str = ".request";
/// The largest request file read to compare it.
const MAX_REQUEST_BYTES: u64 = 4 * 1024 * 1024;
/// The subject of the comments a SwarmForge Retry sends (no chat message).
pub const SENT_BACK: &str = "Sent back: ";

/// Which of the two folders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Clarification,
    Chat,
}

/// The folder of `kind`'s requests in state `done` (else `pending`).
pub fn folder(project: &Project, kind: Kind, done: bool) -> PathBuf {
    match kind {
        Kind::Clarification => project.clarification_requests(done),
        Kind::Chat => project.chat_requests(done),
    }
}

fn tmp_dir(project: &Project) -> PathBuf {
    project.dashboard_dir().join("tmp")
}

fn lock_file(project: &Project) -> PathBuf {
    project.dashboard_dir().join("dashboard.flock")
}

/// One request as SwarmForge lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub kind: Kind,
    pub id: String,
    pub done: bool,
    /// Who asked (clarifications).
    pub role: Option<String>,
    pub created_at: String,
    pub response: String,
    pub body: String,
}

impl Request {
    /// The file's text, as upstream renders it.
    pub fn render(&self) -> String {
        let one = |s: &str| -> String {
            s.chars()
                .filter_map(|c| match c {
                    '\n' => Some("\\n".to_string()),
                    c if c.is_control() => None,
                    c => Some(c.to_string()),
                })
                .collect()
        };
        let mut s = format!(
            "id: {}\nstatus: {}\n",
            one(&self.id),
            if self.done { "done" } else { "pending" }
        );
        if let Some(r) = self.role.as_deref().filter(|r| !r.is_empty()) {
            s.push_str(&format!("role: {}\n", one(r)));
        }
        s.push_str(&format!("created_at: {}\n", one(&self.created_at)));
        if !self.response.trim().is_empty() {
            s.push_str(&format!("response: {}\n", one(self.response.trim_end())));
        }
        s.push('\n');
        s.push_str(&self.body);
        if !self.body.ends_with('\n') {
            s.push('\n');
        }
        s
    }

    pub fn path(&self, project: &Project) -> PathBuf {
        folder(project, self.kind, self.done).join(format!("{}{REQUEST}", self.id))
    }
}

/// The master role (SwarmForge's lane for new work and the chat's
/// addressee): the first agent at the main checkout, else the first agent.
pub fn master_role(roles: &Roles) -> Option<&Role> {
    let mut agents = roles
        .roles
        .iter()
        .filter(|r| !r.is_human() && !r.is_remote());
    let first = agents.clone().next();
    agents.find(|r| r.worktree_name == "master").or(first)
}

/// The question and its numbered options, as a person reads them.
pub fn question_text(m: &Message) -> String {
    let mut q = m.get(names::QUESTION).unwrap_or("").to_string();
    for (i, o) in fields::options(&m.body).iter().enumerate() {
        q.push_str(&format!("\n{}. {o}", i + 1));
    }
    q
}

/// What settled a clarify, as SwarmForge's `response`: the answer's text
/// (the chosen options by label), or the close's reason.
pub fn response_text(clarify: &Message, settled: &Message) -> String {
    if settled.type_name() == Some(types::CLOSE.name) {
        return format!("closed: {}", settled.get(names::REASON).unwrap_or(""));
    }
    // The stored body is one `<n>. <option>` line per choice, then the
    // answer's own text (docs/message-model.md, "Answers").
    let options = fields::options(&clarify.body);
    let choices = settled
        .get(names::CHOICES)
        .and_then(fields::parse_choices)
        .unwrap_or_default();
    let mut parts: Vec<String> = choices
        .iter()
        .filter_map(|n| options.get(n.wrapping_sub(1)).map(|o| o.to_string()))
        .collect();
    let own: Vec<&str> = settled.body.lines().skip(choices.len()).collect();
    let own = own.join("\n");
    if !own.trim().is_empty() {
        parts.push(own.trim().to_string());
    }
    parts.join("\n")
}

/// A reply's text: its body, else its one-line text headers.
fn reply_text(m: &Message) -> String {
    let b = m.body.trim();
    if !b.is_empty() {
        return b.to_string();
    }
    [names::MESSAGE, names::SUBJECT, names::TITLE]
        .iter()
        .find_map(|h| m.get(*h))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Every request the delivered messages of `trail` make: each clarify to a person
/// (pending until an answer or close in reply to it), each person's post
/// to the master role but a Retry's comments (pending until a message in
/// reply to it). Sorted by kind, then id.
pub fn derive(trail: &Trail) -> Vec<Request> {
    let roles = &trail.roles;
    let human = |r: Option<&str>| r.and_then(|r| roles.find(r)).is_some_and(|r| r.is_human());
    let master = master_role(roles).map(|r| r.name.clone());
    // Delivered only: a clarify still in an outbox (or held) was not asked
    // yet, an answer still in one has not reached the asker.
    let live: Vec<&Message> = trail
        .originals
        .iter()
        .filter(|o| o.place == Place::Sent)
        .map(|o| &o.msg)
        .collect();
    // The first reply to each id (originals are in folder order; the
    // earliest created wins).
    let mut replies: BTreeMap<&str, &Message> = BTreeMap::new();
    let mut by_time: Vec<&Message> = live.clone();
    by_time.sort_by_key(|m| m.get(names::CREATED_AT).unwrap_or(""));
    for m in by_time {
        if let Some(r) = m.in_reply_to() {
            replies.entry(r).or_insert(m);
        }
    }
    let mut out = Vec::new();
    for m in &live {
        let Some(id) = m.id().filter(|i| grammar::valid_message_id(i)) else {
            continue;
        };
        let created_at = m.get(names::CREATED_AT).unwrap_or("").to_string();
        let kind = m.type_name();
        if kind == Some(types::CLARIFY.name) && human(m.to()) {
            let settled = replies.get(id).filter(|r| {
                [types::ANSWER.name, types::CLOSE.name].contains(&r.type_name().unwrap_or(""))
            });
            out.push(Request {
                kind: Kind::Clarification,
                id: id.to_string(),
                done: settled.is_some(),
                role: m.sender().map(str::to_string),
                created_at,
                response: settled.map(|s| response_text(m, s)).unwrap_or_default(),
                body: question_text(m),
            });
        } else if kind == Some(types::POST.name)
            && human(m.sender())
            && master.as_deref().is_some_and(|ms| {
                grammar::addressed(m.to().unwrap_or(""), m.sender().unwrap_or(""), ms)
            })
            && !m
                .get(names::SUBJECT)
                .is_some_and(|s| s.starts_with(SENT_BACK))
        {
            let reply = replies.get(id);
            out.push(Request {
                kind: Kind::Chat,
                id: id.to_string(),
                done: reply.is_some(),
                role: None,
                created_at,
                response: reply.map(|r| reply_text(r)).unwrap_or_default(),
                body: m.body.clone(),
            });
        }
    }
    out.sort_by(|a, b| (a.kind, &a.id).cmp(&(b.kind, &b.id)));
    out.dedup_by(|a, b| a.kind == b.kind && a.id == b.id);
    out
}

/// Whether the request files are written: in a project with a person in
/// it, on one host. Across hosts (a bridge) another host's answer changes
/// what they would say without a delivery here to rewrite them, so there
/// they are not written (docs/swarmforge-compat.md §5).
pub fn applies(roles: &Roles) -> bool {
    roles.roles.iter().any(|r| r.is_human()) && !roles.roles.iter().any(|r| r.is_remote())
}

/// Whether delivering `m` may change a request file: a clarify to a
/// person, a person's post, or a reply to anything (an answer or close of
/// a clarify, a reply to a chat). Every other delivery leaves them as they
/// are, so the daemon derives them again only after one of these.
pub fn touches(roles: &Roles, m: &Message) -> bool {
    let human = |r: Option<&str>| {
        crate::protocol::grammar::role_list(r)
            .iter()
            .any(|r| roles.find(r).is_some_and(|r| r.is_human()))
    };
    m.in_reply_to().is_some()
        || (m.type_name() == Some(types::CLARIFY.name) && human(m.to()))
        || (m.type_name() == Some(types::POST.name) && human(m.sender()))
}

fn read(path: &Path) -> Option<Vec<u8>> {
    fsx::read_bounded(path, MAX_REQUEST_BYTES).ok()
}

/// Makes the request folders say what the messages say: each derived
/// request written where its state puts it (temp + fsync + rename; only
/// when it differs), its file in the other state removed. A `done/` file
/// the messages do not settle is left alone (see the module doc). Under
/// an OS lock, so two writers never interleave. Nothing for a project
/// without a person.
pub fn sync(trail: &Trail) -> std::io::Result<()> {
    if !applies(&trail.roles) {
        return Ok(());
    }
    let project = &trail.project;
    let wanted = derive(trail);
    let tmp = tmp_dir(project);
    fsx::ensure_dirs(&[&tmp])?;
    let _lock = fsx::lock(&lock_file(project))?;
    for r in &wanted {
        let path = r.path(project);
        let other = Request {
            done: !r.done,
            ..r.clone()
        }
        .path(project);
        if !r.done && other.exists() {
            // Answered by another tool: theirs stays, reported.
            continue;
        }
        let text = r.render();
        if read(&path).as_deref() != Some(text.as_bytes()) {
            fsx::ensure_dirs(&[path.parent().unwrap_or(project.root.as_path())])?;
            fsx::replace(&tmp, &path, text.as_bytes())?;
        }
        if other.exists() {
            fsx::remove_file(&other)?;
            if let Some(d) = other.parent() {
                fsx::sync_dir(d)?;
            }
        }
    }
    Ok(())
}

/// One way the request files say other than the messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    /// What is wrong, naming the file and the repair.
    pub line: String,
    /// handoffd's next delivering pass repairs it (a file missing, left
    /// behind or out of date), so with handoffd running it is lag, not
    /// loss.
    pub rewritten: bool,
}

/// [`disagreements`] for `swarm status`: the trail is read only in a
/// project with a person or with request folders; one that cannot be read
/// is one line saying so.
pub fn check(project: &Project) -> Vec<Disagreement> {
    check_in(&Swarm::new(project.clone()))
}

/// [`check`] in a loaded swarm.
pub fn check_in(swarm: &Swarm) -> Vec<Disagreement> {
    let project = &swarm.project;
    let applies = swarm.roles().is_ok_and(applies);
    if !applies && !project.dashboard_dir().exists() {
        return Vec::new();
    }
    match Trail::load_in(swarm, &crate::protocol::trail::Scope::originals()) {
        Ok(t) => disagreements(&t),
        Err(e) => vec![Disagreement {
            line: format!("the messages could not be read: {e}"),
            rewritten: false,
        }],
    }
}

/// Where the request files say other than the messages: a request with
/// no file, one in the wrong state or with other text, a file of no
/// request. Each one line naming the file and how to repair it; none for
/// a project without a person and without request folders.
pub fn disagreements(trail: &Trail) -> Vec<Disagreement> {
    let project = &trail.project;
    let root = project.dashboard_dir();
    let applies = applies(&trail.roles);
    if !applies && !root.exists() {
        return Vec::new();
    }
    let wanted = if applies { derive(trail) } else { Vec::new() };
    let mut out = Vec::new();
    let mut say = |line: String, rewritten: bool| out.push(Disagreement { line, rewritten });
    let mut known = std::collections::HashSet::new();
    for r in &wanted {
        let path = r.path(project);
        known.insert(path.clone());
        let other = Request {
            done: !r.done,
            ..r.clone()
        }
        .path(project);
        match read(&path) {
            None if other.exists() && !r.done => say(format!(
                "{}: answered in the file, but no answer to {} was delivered; answer it with `swarm answer {}` (or the cockpit), then this file is rewritten from the answer",
                other.display(),
                r.id,
                r.id
            ), false),
            None => say(format!(
                "{}: missing ({} {} is {}); handoffd writes it after its next delivery",
                path.display(),
                if r.kind == Kind::Chat { "chat post" } else { "clarify" },
                r.id,
                if r.done { "answered" } else { "waiting" }
            ), true),
            Some(b) if b != r.render().as_bytes() => say(format!(
                "{}: says other than message {} (handoffd rewrites it after its next delivery)",
                path.display(),
                r.id
            ), true),
            Some(_) => {}
        }
        if other.exists() && r.done {
            say(format!(
                "{}: still there though {} is answered (handoffd removes it after its next delivery)",
                other.display(),
                r.id
            ), true);
        }
        known.insert(other);
    }
    for kind in [Kind::Clarification, Kind::Chat] {
        for done in [false, true] {
            let dir = folder(project, kind, done);
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut names: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
            names.sort();
            for p in names {
                if !known.contains(&p) {
                    say(format!(
                        "{}: no message of this project makes this request (not a clarify to a person, nor a person's post to the master role); remove it",
                        p.display()
                    ), false);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_as_upstream_does() {
        // pack_web.bb `render-clarification`: id, status, role, created_at,
        // response with newlines as `\n`, a blank line, the question.
        let r = Request {
            kind: Kind::Clarification,
            id: "20260101T000000Z_000001_from_coder".into(),
            done: true,
            role: Some("coder".into()),
            created_at: "2026-01-01T00:00:00Z".into(),
            response: "yes\nand more".into(),
            body: "Which parser?".into(),
        };
        assert_eq!(
            r.render(),
            "id: 20260101T000000Z_000001_from_coder\nstatus: done\nrole: coder\ncreated_at: 2026-01-01T00:00:00Z\nresponse: yes\\nand more\n\nWhich parser?\n"
        );
    }
}
