//! What needs a person (docs/message-model.md, "Human roles and `swarm
//! status`"): every open `clarify`, and the items waiting for a human role.
//! Read from the files only; `swarm status` shows the list.
//!
//! A clarify is open from the moment it is queued until an `answer` or a
//! `close` with `in_reply_to: <clarify id>` is queued (a refused one does not
//! count). A failed clarify was never asked.

use crate::protocol::header::names;
use std::path::PathBuf;

use serde::Serialize;

use crate::agent::mailbox::handle_command;
use crate::daemon::objects;
use crate::error::Result;
use crate::person::answer;
use crate::protocol::clock::{self, Instant};
use crate::protocol::fields;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::line;
use crate::protocol::people;
use crate::protocol::roles::Roles;
use crate::protocol::swarm::Swarm;
use crate::protocol::trail::{self, Original, Place, Scope, Trail};
use crate::protocol::types;
use crate::telemetry::budget;
use crate::text;
use crate::views::transcript;

/// Why an item needs attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An open question to a person.
    Clarify,
    /// An item waiting in a human role's `inbox/new`.
    Waiting,
    /// An agent's pane shows a dialog, menu or permission request
    /// (daemon/pane.rs): a person answers it with `swarm attach <role>`.
    NeedsInput,
    /// An agent's pane shows a rate limit or an authentication error.
    Blocked,
    /// A role's budget (or the swarm's) is used up: the role is parked
    /// until `swarm budget raise` or the next period (docs/cost.md).
    Budget,
    /// A delivery failed three times and is still being retried
    /// (protocol::delivery_retry; SwarmForge's `delivery_attention`).
    Delivery,
    /// handoffd refused a git object a confined agent wrote: its content
    /// is not its name, so a commit naming it is broken on that role's
    /// branch (daemon/objects/, docs/security.md "Git objects").
    ObjectRefused,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Clarify => "clarify",
            Kind::Waiting => "waiting",
            Kind::NeedsInput => "needs_input",
            Kind::Blocked => "blocked",
            Kind::Budget => "budget",
            Kind::Delivery => "delivery",
            Kind::ObjectRefused => "object_refused",
        }
    }
}

/// One attention item.
#[derive(Clone, Debug, Serialize)]
pub struct Item {
    pub kind: Kind,
    pub id: String,
    /// Who asked or sent it.
    pub from: String,
    /// Who must act (the clarify's `to`, or the human role).
    pub role: String,
    #[serde(rename = "type")]
    pub kind_of_message: String,
    /// Since when: the clarify's `created_at`, or the copy's `enqueued_at`.
    pub since: Option<String>,
    pub age_s: Option<u64>,
    /// The question, or the message's one-line summary (escaped).
    pub text: String,
    /// A clarify's options.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    pub path: PathBuf,
    /// The command that handles it (`swarm answer …`, `swarm inbox done …`).
    pub handle: String,
}

fn age(since: Option<Instant>, now: Instant) -> Option<u64> {
    since.map(|t| (now - t).num_seconds().max(0) as u64)
}

fn clarify_item(o: &Original, now: Instant) -> Item {
    let m = &o.msg;
    let since = line::when(m);
    Item {
        kind: Kind::Clarify,
        id: o.id().to_string(),
        from: m.sender().unwrap_or("?").to_string(),
        role: m.to().unwrap_or("?").to_string(),
        kind_of_message: types::CLARIFY.name.to_string(),
        since: since.map(clock::iso),
        age_s: age(since, now),
        text: text::escape(m.get(names::QUESTION).unwrap_or("")),
        options: fields::options(&m.body)
            .into_iter()
            .map(text::escape)
            .collect(),
        path: o.path.clone(),
        handle: handle_command(types::CLARIFY.name, o.id(), m.to().unwrap_or("?")),
    }
}

/// Every attention item: open clarifies (oldest first), then each human
/// role's waiting items (in queue order).
pub fn collect(project: &Project) -> Result<Vec<Item>> {
    collect_in(&Swarm::new(project.clone()))
}

/// [`collect`] in a loaded swarm: the budgets from its config too.
pub fn collect_in(swarm: &Swarm) -> Result<Vec<Item>> {
    let t = Trail::load_in(swarm, &Scope::originals())?;
    let budgets = swarm
        .config()
        .ok()
        .and_then(|c| budget::load_with(&t.project, c).ok());
    Ok(listed(
        &t.originals,
        &t.roles,
        &t.project,
        t.max_bytes,
        clock::now(),
        budgets,
    ))
}

/// [`collect`] on a loaded trail, ages taken at `now`.
pub fn from_trail(t: &Trail, now: Instant) -> Vec<Item> {
    from_originals(&t.originals, &t.roles, &t.project, t.max_bytes, now)
}

/// [`from_trail`] on the originals at hand: only the clarifies, answers and
/// closes among them matter, so a reader that keeps just those (the
/// cockpit) gets the same list without loading the trail again.
pub fn from_originals(
    originals: &[Original],
    roles: &Roles,
    project: &Project,
    max_bytes: u64,
    now: Instant,
) -> Vec<Item> {
    // Read afresh: the cockpit asks on every refresh, for as long as it runs.
    let budgets = budget::load(project).ok();
    listed(originals, roles, project, max_bytes, now, budgets)
}

/// The attention list of [`from_originals`], with the budgets' standing
/// (None: none could be read, and nobody is shown parked).
fn listed(
    originals: &[Original],
    roles: &Roles,
    project: &Project,
    max_bytes: u64,
    now: Instant,
    budgets: Option<budget::Budgets>,
) -> Vec<Item> {
    let done = answer::settled(originals);
    let mut out: Vec<Item> = transcript::messages(originals)
        .into_iter()
        .filter(|o| o.place != Place::Failed)
        .filter(|o| o.msg.type_name() == Some(types::CLARIFY.name))
        .filter(|o| !done.contains_key(o.id()))
        .map(|o| clarify_item(o, now))
        .collect();
    out.extend(waiting(roles, project, max_bytes, now));
    out.extend(panes(roles, project, now));
    out.extend(
        budgets
            .map(|b| parked(roles, project, &b))
            .unwrap_or_default(),
    );
    out.extend(deliveries(project, now));
    out.extend(refused_objects(project, now));
    out
}

/// Most refused git objects listed.
const MAX_REFUSED: usize = 20;

/// The git objects handoffd kept out of the project's store, until the
/// person removes each kept file.
fn refused_objects(project: &Project, now: Instant) -> Vec<Item> {
    objects::refused(project, MAX_REFUSED)
        .into_iter()
        .map(|r| Item {
            kind: Kind::ObjectRefused,
            id: format!("object:{}", r.id),
            from: r.role.clone(),
            role: r.role.clone(),
            kind_of_message: "git_object".into(),
            since: r.at.map(clock::iso),
            age_s: age(r.at, now),
            text: text::escape(&format!(
                "role {} wrote the git object {}, whose content is not its name; handoffd kept it out of the repository, so a commit naming it is broken on that role's branch",
                r.role, r.id
            )),
            options: Vec::new(),
            handle: format!(
                "do not merge the role's branch as it is (`swarm doctor` says more); then remove {}",
                r.path.display()
            ),
            path: r.path,
        })
        .collect()
}

/// Deliveries that failed three times and are being retried, as the
/// daemon's records say (SwarmForge's "Show a delivery in dashboard
/// Attention after three failed attempts while continuing retries").
pub fn deliveries(project: &Project, now: Instant) -> Vec<Item> {
    use crate::protocol::delivery_retry;
    delivery_retry::attention(project)
        .into_iter()
        .map(|a| match a {
            Ok(a) => {
                let name = a
                    .handoff
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Item {
                    kind: Kind::Delivery,
                    id: format!("delivery:{name}"),
                    from: a.sender.clone(),
                    role: a.sender.clone(),
                    kind_of_message: "delivery_attention".into(),
                    since: Some(clock::iso(a.retry.first_failed_at)),
                    age_s: age(Some(a.retry.first_failed_at), now),
                    text: text::escape(&format!(
                        "{} failed attempts to deliver {}; last: {}; next at {}",
                        a.retry.attempt,
                        a.handoff.display(),
                        a.retry.last_error,
                        clock::iso(a.retry.next_at)
                    )),
                    options: Vec::new(),
                    handle: format!(
                        "fix the cause (handoffd retries it), or remove {}",
                        a.handoff.display()
                    ),
                    path: a.record,
                }
            }
            Err((record, why)) => Item {
                kind: Kind::Delivery,
                id: format!("delivery:{}", record.display()),
                from: String::new(),
                role: String::new(),
                kind_of_message: "delivery_attention".into(),
                since: None,
                age_s: None,
                text: text::escape(&format!("unreadable record: {why}")),
                options: Vec::new(),
                handle: format!(
                    "remove {} (handoffd writes it again while it retries)",
                    record.display()
                ),
                path: record,
            },
        })
        .collect()
}

/// Roles a budget parks (docs/cost.md, "Budgets").
fn parked(roles: &Roles, project: &Project, b: &budget::Budgets) -> Vec<Item> {
    roles
        .roles
        .iter()
        .filter(|r| !r.is_human() && !r.is_remote())
        .filter_map(|r| {
            let why = b.parked(&r.name)?;
            Some(Item {
                kind: Kind::Budget,
                id: format!("budget:{}", r.name),
                from: r.name.clone(),
                role: r.name.clone(),
                kind_of_message: "budget_reached".into(),
                since: None,
                age_s: None,
                text: text::escape(&why.words()),
                options: Vec::new(),
                path: project.usage_file(),
                handle: why.handle(),
            })
        })
        .collect()
}

/// Agents whose pane waits for a person, as the daemon last saw them.
fn panes(roles: &Roles, project: &Project, now: Instant) -> Vec<Item> {
    use crate::daemon::pane;
    roles
        .roles
        .iter()
        .filter(|r| !r.is_human() && !r.is_remote())
        .filter_map(|r| {
            let (wait, at, text) = pane::reported(project, &r.name)?;
            let since = clock::parse(&at);
            Some(Item {
                kind: match wait {
                    pane::Wait::NeedsInput => Kind::NeedsInput,
                    pane::Wait::Blocked => Kind::Blocked,
                },
                id: format!("pane:{}", r.name),
                from: r.name.clone(),
                role: r.name.clone(),
                kind_of_message: wait.word().to_string(),
                since: since.map(clock::iso),
                age_s: age(since, now),
                text: text::escape(&text),
                handle: format!("swarm attach {}", r.name),
                options: Vec::new(),
                path: pane::marker_file(project, &r.name),
            })
        })
        .collect()
}

/// Items waiting in human roles' `inbox/new` (clarifies are listed as such).
fn waiting(roles: &Roles, project: &Project, max_bytes: u64, now: Instant) -> Vec<Item> {
    let mut out = Vec::new();
    for r in roles
        .roles
        .iter()
        .filter(|r| r.is_human() && !r.is_remote())
    {
        let root = r.worktree_in(&project.root);
        let new = Worktree::new(root).inbox_new();
        let Ok(names) = trail::handoff_names(&new) else {
            continue;
        };
        for name in names {
            let path = new.join(name);
            let trail::Loaded::Ok(m) = trail::load_message(&path, max_bytes) else {
                continue;
            };
            if m.type_name() == Some(types::CLARIFY.name) || !people::meant_for(&m, &r.name) {
                continue;
            }
            let since = m.get(names::ENQUEUED_AT).and_then(clock::parse);
            let id = m.id().unwrap_or("?").to_string();
            out.push(Item {
                kind: Kind::Waiting,
                handle: handle_command(m.type_name().unwrap_or("?"), &id, &r.name),
                id,
                from: m.sender().unwrap_or("?").to_string(),
                role: r.name.clone(),
                kind_of_message: m.type_name().unwrap_or("?").to_string(),
                since: since.map(clock::iso),
                age_s: age(since, now),
                text: line::summary(&m),
                options: Vec::new(),
                path,
            });
        }
    }
    out
}

/// Seconds as `5s`, `3m`, `2h`, `4d`.
pub fn short_age(s: Option<u64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s < 120 => format!("{s}s"),
        Some(s) if s < 7200 => format!("{}m", s / 60),
        Some(s) if s < 172_800 => format!("{}h", s / 3600),
        Some(s) => format!("{}d", s / 86_400),
    }
}

/// The `ATTENTION` section of `swarm status` (empty when nothing needs a person).
pub fn text(items: &[Item]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let mut s = format!("ATTENTION ({})\n", items.len());
    for i in items {
        let mut line = format!(
            "{:<8} {:<40} {} -> {}  since {} ({})  {}",
            i.kind.as_str(),
            text::escape(&i.id),
            text::escape(&i.from),
            text::escape(&i.role),
            i.since.as_deref().unwrap_or("?"),
            short_age(i.age_s),
            if i.kind == Kind::Waiting {
                format!("{} {}", text::escape(&i.kind_of_message), i.text)
            } else {
                i.text.clone()
            }
        );
        if !i.options.is_empty() {
            let opts: Vec<String> = i
                .options
                .iter()
                .enumerate()
                .map(|(n, o)| format!("{}. {o}", n + 1))
                .collect();
            line.push_str(&format!("  [{}]", opts.join(" | ")));
        }
        s.push_str(line.trim_end());
        s.push_str(&format!("\n  -> {}\n", i.handle));
    }
    s
}
