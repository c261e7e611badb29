//! `notify.command`: tells a person about attention events (a clarify
//! waiting for a person, an agent dead or restarted, a delivery failed, an
//! expectation violated). The journal offers every event; a single thread
//! of its own filters them and runs the command, each run bounded by
//! `notify.timeout`, so delivery never waits for it. A full queue drops
//! events rather than block (the journal keeps them all).

use crate::protocol::grammar;
use crate::protocol::header::names;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::time::Duration;

use crate::daemon::journal::{Event, Kind, Listener};
use crate::error::Error;
use crate::fsx;
use crate::protocol::config::Config;
use crate::protocol::header::Message;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;

/// Events queued for the notify thread before new ones are dropped.
const QUEUE: usize = 256;
/// Longest summary put in the environment.
const MAX_SUMMARY: usize = 200;

#[derive(Clone, Debug)]
pub struct Notifier {
    tx: SyncSender<Event>,
}

/// One attention event, as the command sees it.
#[derive(Debug, PartialEq, Eq)]
pub struct Attention {
    pub event: &'static str,
    pub role: String,
    pub id: String,
    pub summary: String,
}

fn may_matter(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Delivered
            | Kind::Failed
            | Kind::Restarted
            | Kind::AgentDead
            | Kind::NeedsInput
            | Kind::Blocked
            | Kind::ExpectationViolated
            | Kind::BudgetReached
    )
}

impl Notifier {
    /// A running notifier when `swarm.yaml` sets `notify.command` (read when
    /// the daemon starts), else None and no thread.
    pub fn start(project: &Project) -> Option<Notifier> {
        let cfg = Config::load(&project.config_file()).ok()?;
        let cmd = cfg.notify.command.filter(|c| !c.trim().is_empty())?;
        let timeout = cfg.notify.timeout.0;
        let max_bytes = cfg.limits.max_file_bytes;
        let (tx, rx) = sync_channel::<Event>(QUEUE);
        let project = project.clone();
        std::thread::Builder::new()
            .name("notify".into())
            .spawn(move || {
                for ev in rx {
                    if let Some(a) = attention(&project, &ev, max_bytes) {
                        if let Err(e) = run(&cmd, &project, &a, timeout) {
                            eprintln!("handoffd: notify.command for {}: {e}", a.event);
                        }
                    }
                }
            })
            .ok()?;
        Some(Notifier { tx })
    }

    /// Never blocks.
    pub fn offer(&self, ev: &Event) {
        if may_matter(ev.kind) {
            let _ = self.tx.try_send(ev.clone());
        }
    }

    /// The notifier as the journal's listener: offered every event.
    pub fn listener(self) -> Listener {
        Listener(std::sync::Arc::new(move |ev: &Event| self.offer(ev)))
    }
}

/// The message a `delivered` event names: its original, moved from the
/// outbox to `sent/` by then.
fn delivered_message(path: &Path, max_bytes: u64) -> Option<Message> {
    let name = path.file_name()?;
    let sent: PathBuf = path.parent()?.parent()?.join("sent").join(name);
    [sent.as_path(), path].iter().find_map(|p| {
        fsx::read_bounded(p, max_bytes)
            .ok()
            .and_then(|b| Message::parse_bytes(&b).ok())
    })
}

fn one_line(s: &str) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let esc = crate::text::escape(&flat);
    match esc.char_indices().nth(MAX_SUMMARY) {
        Some((i, _)) => format!("{}…", &esc[..i]),
        None => esc,
    }
}

/// Whether `ev` is an attention event, and what to say about it.
pub fn attention(project: &Project, ev: &Event, max_bytes: u64) -> Option<Attention> {
    let id = ev.id.clone().unwrap_or_default();
    let name = |p: &Option<PathBuf>| {
        p.as_ref()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let a = |event, role: Option<&String>, summary: String| Attention {
        event,
        role: role.cloned().unwrap_or_default(),
        id: id.clone(),
        summary: one_line(&summary),
    };
    match ev.kind {
        Kind::Delivered => {
            let m = delivered_message(ev.path.as_deref()?, max_bytes)?;
            if m.kind() != Some(grammar::MessageType::Clarify) {
                return None;
            }
            let roles = Roles::load(&project.roles_tsv()).ok()?;
            let human = grammar::role_list(m.to())
                .into_iter()
                .find(|t| roles.roles.iter().any(|r| r.name == *t && r.is_human()))?;
            Some(Attention {
                event: "clarify_waiting",
                role: human.to_string(),
                id: m.id().unwrap_or(&id).to_string(),
                summary: one_line(&format!(
                    "{} asks: {}",
                    m.sender().unwrap_or("?"),
                    m.get(names::QUESTION).unwrap_or("")
                )),
            })
        }
        Kind::Failed => Some(a(
            "delivery_failed",
            ev.from.as_ref(),
            format!(
                "{} refused: {}",
                name(&ev.path),
                ev.reason.as_deref().unwrap_or("")
            ),
        )),
        Kind::Restarted => Some(a(
            "agent_restarted",
            ev.recipient.as_ref(),
            ev.reason.clone().unwrap_or_default(),
        )),
        Kind::AgentDead => Some(a(
            "agent_dead",
            ev.recipient.as_ref(),
            ev.reason.clone().unwrap_or_default(),
        )),
        Kind::NeedsInput => Some(a(
            "needs_input",
            ev.recipient.as_ref(),
            ev.reason.clone().unwrap_or_default(),
        )),
        Kind::Blocked => Some(a(
            "agent_blocked",
            ev.recipient.as_ref(),
            ev.reason.clone().unwrap_or_default(),
        )),
        Kind::ExpectationViolated => Some(a(
            "expectation_violated",
            ev.recipient.as_ref(),
            format!("{} {}", ev.reason.as_deref().unwrap_or(""), name(&ev.path)),
        )),
        Kind::BudgetReached => Some(a(
            "budget_reached",
            ev.recipient.as_ref(),
            ev.reason.clone().unwrap_or_default(),
        )),
        _ => None,
    }
}

fn run(cmd: &str, project: &Project, a: &Attention, timeout: Duration) -> Result<(), Error> {
    let child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env("SWARMFORGE_EVENT", a.event)
        .env("SWARMFORGE_ROLE", &a.role)
        .env("SWARMFORGE_ID", &a.id)
        .env("SWARMFORGE_SUMMARY", &a.summary)
        .env("SWARMFORGE_PROJECT", &project.root)
        .current_dir(&project.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::process(format!("cannot run it: {e}")))?;
    match crate::sys::child::wait_bounded(child, timeout) {
        Ok(st) if st.success() => Ok(()),
        Ok(st) => Err(Error::process(format!("it failed: {st}"))),
        Err(e) => Err(Error::process(format!("it {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_one_bounded_line() {
        assert_eq!(one_line("a\n  b\x1b"), "a b\\e");
        assert_eq!(one_line(&"x".repeat(500)).chars().count(), MAX_SUMMARY + 1);
    }
}
