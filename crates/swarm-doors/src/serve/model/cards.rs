//! The role cards and the attention list: rebuilt for the roles a change
//! touched (every card every [`CARDS_EVERY`], for what changes without a
//! file), their counts from the events (`folders`). The invariant: a card
//! is emitted only when it differs from the one a page holds.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Role;
use crate::protocol::trail::Loaded;
use crate::protocol::{clock, fields, trail};
use crate::telemetry::activity::Activity;
use crate::views::liveness::Runner;
use crate::views::{attention, liveness};

use super::super::folders;
use super::samples::Samples;
use super::{iso_of, Clock, Delta, Model, ACTIVITY_TAIL, DEPTH_POINTS};

/// The last record of a role's activity file, if any is readable.
pub(super) fn last_activity(project: &Project, role: &str) -> Option<Activity> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = crate::fsx::open_regular(&project.activity_file(role)).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(ACTIVITY_TAIL)))
        .ok()?;
    let mut buf = Vec::new();
    f.take(ACTIVITY_TAIL).read_to_end(&mut buf).ok()?;
    String::from_utf8_lossy(&buf)
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Activity>(l).ok())
}

impl Model {
    /// Lists the folders the cards count once, and notes which roles each
    /// folder and file concerns.
    pub(super) fn track_folders(&mut self) {
        for r in self.roles.roles.clone() {
            let w = self.worktree_of(&r);
            for (dir, kind) in [
                (w.inbox_new(), folders::Kind::New),
                (w.in_process(), folders::Kind::InProcess),
                (w.failed(), folders::Kind::Items),
                (w.outbox(), folders::Kind::Items),
            ] {
                self.folders.track(&dir, kind);
            }
            let files = [
                w.inbox_new(),
                w.in_process(),
                w.failed(),
                w.outbox(),
                w.held(),
                self.project.activity_file(&r.name),
                crate::daemon::wake::last_wake_file(&self.project, &r.name),
                crate::daemon::pane::marker_file(&self.project, &r.name),
            ];
            for f in files {
                self.touches.entry(f).or_default().push(r.name.clone());
            }
            self.quiet.extend([w.sent(), w.completed()]);
        }
    }

    pub(super) fn worktree_of(&self, r: &Role) -> Worktree {
        Worktree::new(r.worktree_in(&self.project.root))
    }

    /// What needs a person now, from the clarifies, answers and closes kept
    /// (as `attention::collect`, without reading the trail).
    pub fn attention_items(&self) -> Vec<attention::Item> {
        attention::from_originals(
            &self.questions,
            &self.roles,
            &self.project,
            self.max_bytes,
            clock::now(),
        )
    }

    /// An attention item as the page gets it: a clarify carries its
    /// `allow_multiple` and `allow_custom` with the protocol's defaults
    /// applied (no, yes), so the page offers free text exactly where an
    /// answer may carry it, whether or not the clarify is among the
    /// messages it has loaded.
    pub(super) fn listed(&self, a: &attention::Item) -> Value {
        let mut v = serde_json::to_value(a).unwrap_or_default();
        if a.kind == attention::Kind::Clarify {
            if let Some(o) = self.questions.iter().find(|o| o.id() == a.id) {
                v["allow_multiple"] = json!(fields::flag(
                    &o.msg,
                    crate::protocol::header::Header::AllowMultiple
                ));
                v["allow_custom"] = json!(fields::flag(
                    &o.msg,
                    crate::protocol::header::Header::AllowCustom
                ));
            }
        }
        v
    }

    /// Rebuilds the attention list, the header and the cards of `only`
    /// (None: every card; every card, too, when what needs a person
    /// changed); emits those that changed.
    pub(super) fn refresh(&mut self, out: &mut Vec<Delta>, only: Option<&HashSet<String>>) {
        let now = clock::now();
        let items = self.attention_items();
        let held = crate::person::holds::list(&self.project).unwrap_or_default();
        let listed: Vec<Value> = items.iter().map(|a| self.listed(a)).collect();
        let att = json!({"attention": listed, "held": held});
        let mut only = only;
        if att != self.attention {
            self.attention = att.clone();
            self.emit(out, "attention", &att);
            only = None;
        }
        if only.is_none() {
            self.carded = Clock::now();
        }
        let runner = Runner::of(&self.project);
        let roles = self.roles.roles.clone();
        for r in roles
            .iter()
            .filter(|r| only.is_none_or(|o| o.contains(&r.name)))
        {
            let latency = self.latency.get_mut(&r.name).map(Samples::json);
            let mut card = self.card(r, &runner, &items, &held);
            card["latency"] = latency.unwrap_or(Value::Null);
            if self.cards.get(&r.name) != Some(&card) {
                let depth = card["new"].as_u64().unwrap_or(0);
                let pts = self.depth.entry(r.name.clone()).or_default();
                if pts.back().map(|p| p.1) != Some(depth) {
                    if pts.len() == DEPTH_POINTS {
                        pts.pop_front();
                    }
                    pts.push_back((now.timestamp_millis(), depth));
                }
                self.cards.insert(r.name.clone(), card.clone());
                self.emit(out, "role", &card);
            }
        }
        let pid = crate::daemon::control::running_pid(&self.project);
        let header = json!({
            "root": self.project.root,
            "daemon_running": pid.is_some(),
            "daemon_pid": pid,
            "paused": crate::daemon::gate::pause_state(&self.project),
        });
        if header != self.header {
            self.header = header.clone();
            self.emit(out, "header", &header);
        }
    }

    /// A role's card: its queue, its agent, its work, its spend.
    pub(super) fn card(
        &self,
        r: &Role,
        runner: &Runner,
        items: &[attention::Item],
        held: &[crate::person::holds::Held],
    ) -> Value {
        let wt = self.worktree_of(r);
        let (new, oldest) = self.folders.count(&wt.inbox_new());
        let ip = self.folders.first(&wt.in_process()).map(|(path, t)| {
            let file = if path.is_dir() {
                None
            } else {
                match trail::load_message(&path, self.max_bytes) {
                    Loaded::Ok(m) => Some(m),
                    _ => None,
                }
            };
            json!({
                "name": path.file_name().map(|n| crate::text::escape(&n.to_string_lossy())),
                "id": file.as_ref().and_then(|m| m.id().map(str::to_string)),
                "type": file.as_ref().and_then(|m| m.type_name().map(str::to_string)),
                "summary": file.as_ref().map(crate::protocol::line::summary),
                "since": t.map(iso_of),
            })
        });
        let mut live = runner.liveness(&self.project, r);
        let waiting_for = liveness::waiting_for(&self.roles, r, ip.is_some(), items, &mut live);
        let stuck = (new > 0 && ip.is_none())
            || items
                .iter()
                .any(|a| a.kind == attention::Kind::Clarify && a.from == r.name);
        let not_moving = stuck
            .then(|| liveness::not_moving(&self.project, r, live.as_ref(), items))
            .flatten();
        let last_wake =
            std::fs::read_to_string(crate::daemon::wake::last_wake_file(&self.project, &r.name))
                .ok()
                .map(|s| crate::text::escape(s.trim()));
        json!({
            "role": r.name,
            "human": r.is_human(),
            "state": live.as_ref().map(|l| l.state.word()),
            "since": live.as_ref().and_then(|l| l.since.clone()),
            "prompt": live.as_ref().and_then(|l| l.detail.clone()),
            "options": live.as_ref().map(|l| l.options.iter().map(|c| c.label.clone()).collect::<Vec<_>>()).unwrap_or_default(),
            "waiting_for": waiting_for,
            "new": new,
            "oldest_since": oldest.map(iso_of),
            "in_process": ip,
            "failed": self.folders.count(&wt.failed()).0,
            "outbox": self.folders.count(&wt.outbox()).0,
            "held": held.iter().filter(|h| h.from == r.name).count(),
            "last_wake": last_wake,
            "not_moving": not_moving,
            "problem": wt.symlinked_inbox_folder().map(|l| crate::protocol::layout::symlinked_inbox_reason(&l)),
            "activity": last_activity(&self.project, &r.name),
            // An ACP client runs for the role: its turn can be cancelled.
            "acp": crate::protocol::launch_files::acp_state_file(&self.project, &r.name).exists(),
        })
    }
}
