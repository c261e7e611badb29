//! The daemon's forum duties: counting contributions toward the moderator's
//! next digest, closing idle sessions, and watching discussion turns
//! (`turn_within`, `skip_after`). Everything starts from the files (the
//! delivered originals and the turn logs), so a restart changes nothing.
//! The daemon reaches all of it through `daemon::feature::Feature` only.

pub mod discussion;
pub mod history;
pub mod moderator;
pub mod record;
pub mod requests;
pub mod session;

use crate::protocol::header::names;
use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::daemon::feature::{Admission, Duties, Feature, Pass};
use crate::daemon::journal::{Event, Kind};
use crate::daemon::wake;
use crate::forum::moderator::Moderator;
use crate::protocol::clock;
use crate::protocol::grammar::{self, MessageType};
use crate::protocol::header::Message;

/// The forum as the daemon sees it; its state is built by `start` (a
/// one-pass daemon admits and records, but counts nothing).
#[derive(Default)]
pub struct Forum {
    state: Option<State>,
}

struct State {
    moderator: Moderator,
    /// Per session: `created_at` of its newest delivered message.
    last_activity: HashMap<String, String>,
    /// (discussion, turn index) already reported late.
    late: HashSet<(String, usize)>,
}

fn age_secs(iso: &str) -> Option<f64> {
    let t = clock::parse(iso)?;
    Some((clock::now() - t).num_milliseconds() as f64 / 1000.0)
}

impl State {
    /// Rebuilds forum state from the delivered originals; appends turns that a
    /// crash kept out of a discussion's log.
    fn start(d: &Duties) -> State {
        let (project, roles, config) = (d.project, d.roles, d.config);
        let said = history::delivered(roles, config.limits.max_file_bytes);
        let moderator = config.forum.moderator.as_deref().unwrap_or("");
        let mut last_activity: HashMap<String, String> = HashMap::new();
        for s in &said {
            if let Some(sess) = &s.session {
                let e = last_activity.entry(sess.clone()).or_default();
                if s.created_at > *e {
                    *e = s.created_at.clone();
                }
            }
        }
        if let Ok(all) = discussion::list(project) {
            for d in all {
                let logged: HashSet<String> = discussion::log(project, &d.id)
                    .map(|l| l.into_iter().map(|e| e.id).collect())
                    .unwrap_or_default();
                for s in said
                    .iter()
                    .filter(|s| s.discussion.as_deref() == Some(d.id.as_str()))
                {
                    if !logged.contains(&s.id) {
                        let _ = discussion::record_turn(project, &d.id, &s.from, &s.id);
                    }
                }
            }
        }
        let mut m = Moderator::from_history(&said, moderator);
        m.adopt_open(roles, config, config.limits.max_file_bytes);
        State {
            moderator: m,
            last_activity,
            late: HashSet::new(),
        }
    }

    /// Counts what a pass delivered; queues a digest request when due.
    /// Returns true when a new file waits for delivery.
    fn count(&mut self, d: &Duties, m: &Message) {
        if let (Some(s), Some(t)) = (m.session(), m.get(names::CREATED_AT)) {
            let e = self.last_activity.entry(s.to_string()).or_default();
            if t > e.as_str() {
                *e = t.to_string();
            }
        }
        let moderator = d.config.forum.moderator.as_deref().unwrap_or("");
        self.moderator.delivered(m, moderator);
    }

    /// Queues a digest request when one is due. True when a file was queued.
    fn tick(&mut self, d: &Duties) -> bool {
        let current = session::current(d.project).ok().flatten().map(|s| s.id);
        self.moderator
            .tick(d.project, d.roles, d.config, d.journal, current.as_deref())
    }

    /// Between passes, while a digest request is open or a backoff runs: a
    /// finished request (done-current moves no outbox file) or an expired
    /// backoff lets the next request go out now, not at the next rescan.
    /// Returns true when a new file waits for delivery.
    fn poll(&mut self, d: &Duties) -> bool {
        self.moderator.waiting() && self.tick(d)
    }

    /// Idle sessions, late and skipped discussion turns. Returns true when a
    /// new file waits for delivery.
    fn sweep(&mut self, d: &Duties) -> bool {
        let (project, roles, config, journal, waker) =
            (d.project, d.roles, d.config, d.journal, d.waker);
        if let Ok(Some(s)) = session::current(project) {
            let last = self
                .last_activity
                .get(&s.id)
                .filter(|t| **t > s.started_at)
                .unwrap_or(&s.started_at);
            if age_secs(last).is_some_and(|a| a > config.forum.idle_close.0.as_secs_f64()) {
                if let Ok(closed) = session::close(project, Some(&s.id), "idle_timeout") {
                    journal.record(
                        &Event::new(Kind::Closed)
                            .path(&closed.path)
                            .reason("idle_timeout"),
                    );
                }
            }
        }
        let Ok(all) = discussion::list(project) else {
            return false;
        };
        for d in all.into_iter().filter(discussion::Discussion::is_open) {
            let Ok(log) = discussion::log(project, &d.id) else {
                continue;
            };
            let last = log.last().map_or(d.opened_at.clone(), |e| e.time.clone());
            let Some(age) = age_secs(&last) else { continue };
            let expected = d.expected(&log).to_string();
            let turn = log.len();
            let within = config.discussion.turn_within.0.as_secs_f64();
            if age > within && self.late.insert((d.id.clone(), turn)) {
                journal.record(
                    &Event::new(Kind::ExpectationViolated)
                        .recipient(&expected)
                        .path(&d.path)
                        .reason(format!(
                            "turn_within {} in discussion {}",
                            config.discussion.turn_within, d.id
                        )),
                );
            }
            if let Some(skip) = config.discussion.skip_after {
                if age > skip.0.as_secs_f64()
                    && discussion::record_skip(project, &d.id, &expected, turn).unwrap_or(false)
                {
                    journal.record(
                        &Event::new(Kind::Skipped)
                            .recipient(&expected)
                            .path(&d.path)
                            .reason(format!("skip_after {skip} in discussion {}", d.id)),
                    );
                    // Tell the next speaker it is their turn now.
                    let next = d.order[(turn + 1) % d.order.len()].clone();
                    if let Some(role) = roles.find(&next).filter(|r| !r.is_human()) {
                        waker.wake(wake::Request {
                            role: role.name.clone(),
                            session: role.session.clone(),
                            worktree: role.worktree_path.clone(),
                            path: d.path.clone(),
                            method: wake::method(project, config),
                            rewake: false,
                        });
                    }
                }
            }
        }
        false
    }
}

impl Feature for Forum {
    fn start(&mut self, duties: &Duties) {
        // Confined agents' requests a killed daemon took but did not answer.
        requests::resume(duties.project, duties.roles);
        self.state = Some(State::start(duties));
    }

    fn admit(&mut self, duties: &Duties, msg: &Message) -> Admission {
        let Some(id) = msg.discussion() else {
            return Admission::Admit;
        };
        match discussion::admit(duties.project, id, msg) {
            Ok(()) => Admission::Admit,
            Err(discussion::Admit::Refused(r)) => Admission::Refuse(r),
            Err(discussion::Admit::Transient(r)) => Admission::Wait(r),
        }
    }

    /// The session's latest digest is recorded (a discussion turn was logged
    /// when it was admitted); contributions are counted once started.
    fn delivered(&mut self, duties: &Duties, msg: &Message, sent_path: &Path) {
        if msg.kind() == Some(MessageType::Digest) {
            if let Some(s) = msg.session().filter(|s| grammar::valid_session_id(s)) {
                if let Err(e) = session::set_latest_digest(duties.project, s, sent_path) {
                    eprintln!("handoffd: cannot record the latest digest of {s}: {e}");
                }
            }
        }
        if let Some(state) = self.state.as_mut() {
            state.count(duties, msg);
        }
    }

    fn after_pass(&mut self, duties: &Duties, _: Pass) -> bool {
        self.state.as_mut().is_some_and(|s| s.tick(duties))
    }

    /// Also carries out the confined agents' forum and board requests.
    fn poll(&mut self, duties: &Duties) -> bool {
        requests::serve(duties.project, duties.roles);
        self.state.as_mut().is_some_and(|s| s.poll(duties))
    }

    fn sweep(&mut self, duties: &Duties) -> bool {
        self.state.as_mut().is_some_and(|s| s.sweep(duties))
    }
}
