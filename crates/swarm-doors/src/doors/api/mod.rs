//! `agent: api`: the built-in runner (`swarm run-api --role R`) for model
//! agents without a CLI. It drains the role's queue through the library
//! calls the helpers use: take an item, ask the model once (the primer as the
//! system prompt, the item as `ready-next` prints it, with its `CONTEXT:` /
//! `CONTRIBUTIONS:`, as the user turn), send the answer through the same
//! draft validation as a person's draft, finish the item (`--failed <why>`
//! when there is no answer). Then, for each open discussion where it is the
//! role's turn, it speaks once. It exits when nothing is left, like a
//! scripted agent; the supervisor or the tmux pane runs it again on new mail.
//!
//! Which items get a call: a `digest_request` (answered with a `digest` to
//! all), a discussion turn when it is this role's turn (a `post` in the
//! discussion; none when it is not: no call), and mail addressed to the role
//! itself or mentioning it (a `note` or `post` back to the sender).
//! Broadcasts, digests, answers, closes and reactions are read and finished
//! without a call, so two model agents never answer each other's broadcasts
//! forever. An item the role already answered (a crash between the send and
//! the finish) is finished without a second call.

//!
//! The parts: the model call (`chat`), what a reply is sent as and says
//! (`reply`), what a call costs (`spend`); here, the runner's loop.

pub mod chat;
mod reply;
mod spend;
#[cfg(test)]
mod tests;

pub use reply::clean;
use reply::{draft_text, kind_name, ReplyPlan};

use crate::protocol::header::names;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::place;
use crate::agent::printout::{self, Viewer};
use crate::agent::queue::{Item, Ready};
use crate::agent::send::{self, Sender};
use crate::error::{Error, Result};
use crate::forum::discussion;
use crate::fsx;
use crate::launch::plan::{AgentSpec, Plan};
use crate::protocol::config::RoleConfig;
use crate::protocol::draft;
use crate::protocol::fields;
use crate::protocol::grammar::MessageType;
use crate::protocol::header::Message;
use crate::protocol::roles::ReceiveMode;
use crate::protocol::types;

use chat::{Endpoint, Failure};

/// Told to the model after the primer: it answers in text, the runner acts.
const RUNNER_NOTE: &str = "\n\n## How you answer here\n\nYou run without a shell: you are shown one item at a time, as ready_for_next.sh prints it. Reply with the text of your answer only (no headers, no commands). The runner sends it for you as the right message type and finishes the item.\n";

/// Longest `note` message.
const NOTE_MAX_CHARS: usize = 80;

/// What one run did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub items: usize,
    pub calls: usize,
    pub sent: Vec<PathBuf>,
    pub failed: usize,
    /// Stopped because the role's budget (or the swarm's) is used up.
    pub parked: bool,
}

/// `swarm run-api --base-url U --model M [--api-key-env V]`: run a role
/// that is not `agent: api` in swarm.yaml (a script that hands over to the
/// runner, as the examples do when a model server is configured).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
}

/// A role's runner: where it works, what it may send, how it asks.
pub struct Runner {
    role: String,
    cwd: PathBuf,
    system: String,
    endpoint: Endpoint,
    allowed: Vec<&'static str>,
}

impl Runner {
    /// Reads the role's `agent: api` keys and, once, its key from the
    /// environment variable `api_key_env` names. The variable is then removed
    /// from this process's environment so no child (git) inherits it.
    pub fn new(cwd: &Path, role: &str, over: &Overrides) -> Result<Runner> {
        let at = place::resolve_as(cwd, role)?;
        let project = at
            .project()
            .cloned()
            .ok_or_else(|| Error::not_found(format!("no project found from {}", cwd.display())))?;
        let plan = Plan::load(&project.root)?;
        let planned = plan.roles.iter().find(|r| r.name == role);
        let rc: Option<&RoleConfig> = at.config().role(role);
        let (Some(planned), Some(rc)) = (planned, rc) else {
            return Err(Error::not_found(format!(
                "role '{role}' is not in {}\n  hint: `swarm run-api` runs roles whose swarm.yaml entry says `agent: api`",
                project.config_file().display()
            )));
        };
        let mut merged = rc.clone();
        if over.base_url.is_some() {
            merged.base_url.clone_from(&over.base_url);
            if over.model.is_some() {
                merged.model.clone_from(&over.model);
            }
            if over.api_key_env.is_some() {
                merged.api_key_env.clone_from(&over.api_key_env);
            }
            if let Some(why) = crate::launch::plan::api_problem(&merged) {
                return Err(Error::bad_input(format!(
                    "swarm run-api for role '{role}': {why}\n  hint: e.g. --base-url http://127.0.0.1:11434/v1 --model llama3.2 [--api-key-env OPENAI_API_KEY]"
                )));
            }
        } else if planned.agent != AgentSpec::Api {
            return Err(Error::bad_input(format!(
                "role '{role}' in {} is not `agent: api`\n  hint: set `agent: api` with `base_url`, `model` and `api_key_env`, or pass --base-url and --model",
                project.config_file().display()
            )));
        }
        let rc = &merged;
        let key = match rc.api_key_env.as_deref() {
            None => None,
            Some(var) => {
                let k = std::env::var(var).ok().filter(|k| !k.is_empty());
                if k.is_none() {
                    return Err(Error::env(format!(
                        "the environment variable {var} (api_key_env of role '{role}' in {}) is not set\n  hint: export it before `swarm up`, or remove api_key_env for a server without a key",
                        project.config_file().display()
                    )));
                }
                std::env::remove_var(var);
                k
            }
        };
        fsx::set_fsync(at.config().daemon.fsync);
        let system = format!(
            "{}{RUNNER_NOTE}",
            crate::launch::primer::primer(&plan, role)?
        );
        Ok(Runner {
            role: role.to_string(),
            cwd: cwd.to_path_buf(),
            system,
            endpoint: Endpoint::new(
                rc.base_url.as_deref().unwrap_or_default(),
                rc.model.as_deref().unwrap_or_default(),
                key,
                rc.request_timeout.0,
                rc.retries,
            ),
            allowed: at.config().allowed_types(role),
        })
    }

    /// Drains the queue, then takes each discussion turn that is this
    /// role's. `say` gets one progress line per step (never the key).
    pub fn run(&self, say: &mut dyn FnMut(&str)) -> Result<Summary> {
        let mut sum = Summary::default();
        loop {
            if let Some(why) = self.parked() {
                say(&format!("{}: parked, no call: {}", self.role, why.words()));
                sum.parked = true;
                return Ok(sum);
            }
            let at = place::resolve_as(&self.cwd, &self.role)?;
            let inbox = at.inbox();
            // One item at a time, whatever the role's receive mode: one call
            // answers one message.
            let (ready, _reactions) = inbox.ready_noted(ReceiveMode::Task)?;
            let Ready::Task {
                item,
                answers,
                resumed,
            } = &ready
            else {
                break;
            };
            sum.items += 1;
            let view = place::forum_view(&at, &ready, Some(&self.role));
            // `CARD_TYPE:` / `THIS_CARD:`, as `ready-next` prints them.
            let viewer = Viewer {
                role: Some(&self.role),
                forum: Some(&view),
                preamble: at.keeps_preamble(),
                cards: at.routes(),
            };
            let shown = printout::task_text(item, viewer, answers);
            let id = item.msg.id().unwrap_or("").to_string();
            let failed = match self.reply_plan(&at.wt, item) {
                None => {
                    say(&format!(
                        "{}: read {} ({}), no answer needed",
                        self.role,
                        id,
                        kind_name(item)
                    ));
                    None
                }
                // Only an item already in process (a run killed after its
                // send) can have been answered; fresh items skip the scan.
                Some(plan)
                    if *resumed && answered(&at.wt, &id, at.config().limits.max_file_bytes) =>
                {
                    say(&format!(
                        "{}: {id} was answered already; {} skipped",
                        self.role, plan.ty
                    ));
                    None
                }
                Some(plan) => {
                    sum.calls += 1;
                    match self.ask_and_send(&plan, &shown, Some(&item.msg), say) {
                        Ok(p) => {
                            sum.sent.push(p);
                            None
                        }
                        Err(f) => Some(f.0),
                    }
                }
            };
            if let Some(why) = &failed {
                sum.failed += 1;
                say(&format!("{}: {id} failed: {why}", self.role));
            }
            let reason = failed.as_deref().map(fit_reason);
            inbox.done_failed(ReceiveMode::Task, reason.as_deref())?;
        }
        self.take_open_turns(&mut sum, say)?;
        Ok(sum)
    }

    /// Discussions whose expected speaker is this role, with no turn of it
    /// still on its way: the role speaks (AG2's `can_send` before a call).
    fn take_open_turns(&self, sum: &mut Summary, say: &mut dyn FnMut(&str)) -> Result<()> {
        let at = place::resolve_as(&self.cwd, &self.role)?;
        let Some(project) = at.project() else {
            return Ok(());
        };
        for d in discussion::list(project)? {
            if !d.is_open() || !d.order.iter().any(|r| r == &self.role) {
                continue;
            }
            if !self.may_speak(&at.wt, &d.id)? {
                continue;
            }
            if let Some(why) = self.parked() {
                say(&format!("{}: parked, no call: {}", self.role, why.words()));
                sum.parked = true;
                return Ok(());
            }
            let ctx = discussion_context(project, &d.id, at.config().limits.max_file_bytes);
            let shown = format!(
                "DISCUSSION: {}\nORDER: {}\nIt is your turn.\n{ctx}",
                d.id,
                d.order.join(",")
            );
            let plan = ReplyPlan {
                ty: self
                    .pick(&[types::POST.name, types::NOTE.name])
                    .unwrap_or(types::POST.name),
                to: "all".into(),
                priority: "50".into(),
                discussion: Some(d.id.clone()),
                subject: None,
            };
            sum.calls += 1;
            match self.ask_and_send(&plan, &shown, None, say) {
                Ok(p) => sum.sent.push(p),
                Err(f) => {
                    sum.failed += 1;
                    say(&format!(
                        "{}: turn in discussion {} not taken: {}",
                        self.role, d.id, f.0
                    ));
                }
            }
        }
        Ok(())
    }

    /// It is this role's turn in `id` and no turn of it waits in its outbox
    /// (the daemon records a turn at delivery, so until then the turn log
    /// still expects this role).
    fn may_speak(&self, wt: &crate::protocol::layout::Worktree, id: &str) -> Result<bool> {
        let place = place::resolve_as(&self.cwd, &self.role)?;
        let Some(project) = place.project() else {
            return Ok(false);
        };
        if discussion::refusal(project, id, &self.role)?.is_some() {
            return Ok(false);
        }
        Ok(!headers_in(&wt.outbox(), 1 << 20)
            .iter()
            .any(|m| m.discussion() == Some(id)))
    }

    /// What to send back for `item`, or None when it needs no call.
    fn reply_plan(&self, wt: &crate::protocol::layout::Worktree, item: &Item) -> Option<ReplyPlan> {
        let kind = item.msg.kind()?;
        let priority = item
            .msg
            .priority()
            .filter(|p| fields::valid_priority(p))
            .unwrap_or("50")
            .to_string();
        if kind == MessageType::DigestRequest {
            return self.pick(&[types::DIGEST.name]).map(|ty| ReplyPlan {
                ty,
                to: "all".into(),
                priority: "40".into(),
                discussion: None,
                subject: Some("digest".into()),
            });
        }
        if let Some(d) = item.msg.discussion() {
            if !matches!(self.may_speak(wt, d), Ok(true)) {
                return None;
            }
            return self
                .pick(&[types::POST.name, types::NOTE.name])
                .map(|ty| ReplyPlan {
                    ty,
                    to: "all".into(),
                    priority,
                    discussion: Some(d.to_string()),
                    subject: None,
                });
        }
        if !matches!(
            kind,
            MessageType::Note | MessageType::Post | MessageType::GitHandoff
        ) {
            return None;
        }
        let to_me = crate::protocol::grammar::role_list(item.msg.to())
            .iter()
            .any(|r| r == &self.role)
            || crate::protocol::grammar::role_list(item.msg.get(names::MENTIONS))
                .iter()
                .any(|r| r == &self.role);
        let from = item.msg.sender()?;
        if !to_me || from == self.role || from == "handoffd" {
            return None;
        }
        let order: &[&str] = if kind == MessageType::Note {
            &[types::NOTE.name, types::POST.name]
        } else {
            &[types::POST.name, types::NOTE.name]
        };
        self.pick(order).map(|ty| ReplyPlan {
            ty,
            to: from.to_string(),
            priority,
            discussion: None,
            subject: None,
        })
    }

    /// The first of `order` this role may send.
    fn pick(&self, order: &[&'static str]) -> Option<&'static str> {
        order.iter().copied().find(|t| self.allowed.contains(t))
    }

    /// One call, then the answer sent as `plan` says.
    fn ask_and_send(
        &self,
        plan: &ReplyPlan,
        shown: &str,
        about: Option<&Message>,
        say: &mut dyn FnMut(&str),
    ) -> std::result::Result<PathBuf, Failure> {
        let ask = format!(
            "{shown}\n\nYour answer will be sent as a {} to {}{}.",
            plan.ty,
            plan.to,
            match plan.ty {
                "note" => format!(" (one line, at most {NOTE_MAX_CHARS} characters)"),
                "digest" => " (a synthesis of the contributions above, at most 4 KiB)".into(),
                _ => String::new(),
            }
        );
        say(&format!(
            "{}: asking {} at {}",
            self.role, self.endpoint.model, self.endpoint.url
        ));
        let mut spent = Vec::new();
        let asked = crate::protocol::clock::iso_now();
        let answer = self
            .endpoint
            .complete(&self.system, &ask, say, &mut |s| spent.push(s));
        for s in spent {
            self.record_usage(about, s, &asked, say);
        }
        let answer = answer?;
        let text = draft_text(plan, &answer).map_err(|e| Failure(e.to_string()))?;
        let sender =
            Sender::locate(&self.role, &self.cwd).map_err(|e| Failure(one_line_err(&e)))?;
        let parsed = draft::parse_bytes(text.as_bytes());
        let q = send::submit(&sender, &parsed, "run-api:answer")
            .map_err(|e| Failure(format!("answer refused: {}", one_line_err(&e))))?;
        say(&format!(
            "{}: sent {} {}",
            self.role,
            plan.ty,
            q.path.display()
        ));
        Ok(q.path)
    }
}

/// A refusal's text on one line (the cause, without the repair hints).
fn one_line_err(e: &Error) -> String {
    let s = e.to_string();
    let mut lines = s.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or("").to_string();
    let rest: Vec<&str> = lines
        .filter(|l| l.trim_start().starts_with("- ") || l.contains("line"))
        .take(2)
        .collect();
    chat::one_line(&[first, rest.join(" ")].join(" "))
}

/// A `done-current --failed` reason: one line, at most 200 characters.
fn fit_reason(why: &str) -> String {
    let one = chat::one_line(why);
    let max = crate::agent::queue::MAX_FAILED_REASON;
    let mut cut: String = one.chars().take(max).collect();
    if cut.len() < one.len() {
        cut = one.chars().take(max - 1).collect();
        cut.push('…');
    }
    cut
}

/// The headers of every handoff file directly in `dir` (unreadable ones
/// skipped).
fn headers_in(dir: &Path, max: u64) -> Vec<Message> {
    crate::protocol::store::each(dir)
        .filter(|e| e.is_handoff_named())
        .filter_map(|e| e.message(max))
        .collect()
}

/// Whether this worktree already sent an answer to message `id` (queued or
/// delivered): a run killed between its send and its finish must not ask
/// twice.
fn answered(wt: &crate::protocol::layout::Worktree, id: &str, max: u64) -> bool {
    !id.is_empty()
        && [wt.outbox(), wt.sent(), wt.failed()].iter().any(|d| {
            headers_in(d, max)
                .iter()
                .any(|m| m.in_reply_to() == Some(id))
        })
}

/// `CONTEXT:` for a turn taken without an item: the discussion's last turns
/// as `ready-next` shows them on a turn item.
fn discussion_context(project: &crate::protocol::layout::Project, id: &str, max: u64) -> String {
    let roles = crate::protocol::roles::Roles::load(&project.roles_tsv()).unwrap_or_default();
    let Ok(log) = discussion::log(project, id) else {
        return String::new();
    };
    let Ok(d) = discussion::load(project, id) else {
        return String::new();
    };
    let window = (2 * d.order.len()).max(4);
    let mut s = String::from("CONTEXT:\n");
    if log.is_empty() {
        s.push_str("(no turns yet: you open the discussion)\n");
    }
    for e in &log[log.len().saturating_sub(window)..] {
        if e.kind != "turn" {
            s.push_str(&format!("- {}: (skipped)\n", e.role));
            continue;
        }
        let text = crate::protocol::grammar::id_sender(&e.id)
            .and_then(|sender| roles.find(sender))
            .and_then(|r| {
                crate::agent::queue::find_original(
                    &crate::protocol::layout::Worktree::new(&r.worktree_path),
                    &e.id,
                    max,
                )
            })
            .map(|o| {
                let b = o
                    .msg
                    .get(names::MESSAGE)
                    .map(str::to_string)
                    .unwrap_or_else(|| o.msg.body.trim().to_string());
                chat::one_line(&b)
            })
            .unwrap_or_else(|| format!("(message {} not found)", e.id));
        s.push_str(&format!("- {}: {text}\n", e.role));
    }
    s
}

/// The longest a whole `run` is expected to wait on one call (for callers
/// that set their own deadline).
pub fn call_budget(timeout: Duration, retries: u32) -> Duration {
    timeout * (retries + 1) + Duration::from_secs(8) * retries
}
