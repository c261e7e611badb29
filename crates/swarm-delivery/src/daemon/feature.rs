//! The one way a feature joins the delivery core: the forum, seat requests,
//! the turn-end relay and the search index each implement [`Feature`], and
//! the binary that composes handoffd registers them ([`Features`], handed to
//! `daemon::run`). The daemon calls only this trait, at fixed points of its
//! pass and its loop, and names no feature module, so delivery stays a pass
//! over files that knows no collaboration style, no lineup and no index
//! (the features live in crates above `swarm-delivery`, so the compiler keeps
//! this: the core cannot name them).
//!
//! The invariant a feature may rely on, and must keep: every call is made on
//! the daemon's loop (or, for [`Feature::off_loop`], on the agents' check
//! thread, one check at a time), in the order the features were registered;
//! a hook that decides (`refuse`, `admit`, `before_sent`) is asked before any
//! copy is written or before the original moves, so what it refuses is never
//! half delivered. A feature that needs a thread of its own starts it in
//! [`Feature::start`] and ends it when it is dropped (with the daemon).
//!
//! A duty of the daemon's own (its git guard, say) is no feature: it is
//! called from the loop in `daemon/mod.rs` (see `Daemon::serve`).

use std::path::Path;

use crate::daemon::journal::Journal;
use crate::daemon::wake::Waker;
use crate::error::Result;
use crate::protocol::config::Config;
use crate::protocol::header::Message;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;

/// What a feature may use while it does its duties.
pub struct Duties<'a> {
    pub project: &'a Project,
    pub roles: &'a Roles,
    pub config: &'a Config,
    pub journal: &'a Journal,
    pub waker: &'a Waker,
}

/// A feature's word on one message before any copy of it is written.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    Admit,
    /// Refused for good: the original goes to `failed/` with this reason.
    Refuse(String),
    /// Not now: the original waits in the outbox (logged `deferred`).
    Wait(String),
}

/// What a pass did, as `after_pass` is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// The first pass of this daemon.
    pub first: bool,
    /// The pass moved a file out of an outbox (delivered or failed).
    pub moved: bool,
}

/// Work a feature does off the daemon's loop, on the agents' check thread.
pub type OffLoop = Box<dyn FnOnce(&Project, &Roles, &Journal) + Send>;

/// A feature of the delivery core. Every hook has a default that does
/// nothing, so a feature implements only the points it needs.
pub trait Feature: Send {
    /// At start-up, before the first pass (`--once` too): take up what a
    /// killed daemon left half done.
    fn resume(&mut self, _: &Duties) {}
    /// Once the daemon watches its folders (not with `--once`): rebuild
    /// state from the files, start a thread of its own.
    fn start(&mut self, _: &Duties) {}
    /// Before the core's own checks of `msg` (its recipients, a pause, a
    /// hold): `Some(reason)` refuses it for good, to `failed/`.
    fn refuse(&mut self, _: &Duties, _: &Message) -> Option<String> {
        None
    }
    /// After the core's checks, before any copy of `msg` is written (a
    /// discussion turn is logged here, so the next speaker is known before
    /// it is woken).
    fn admit(&mut self, _: &Duties, _: &Message) -> Admission {
        Admission::Admit
    }
    /// Every copy of `msg` is durable; its original has not moved to `sent/`
    /// yet. `Err(why)`: the original waits in the outbox (deferred, with
    /// the error's text), so what is recorded here is never missing for a
    /// sent message.
    fn before_sent(&mut self, _: &Duties, _: &Message) -> Result<()> {
        Ok(())
    }
    /// The original of `msg` is durable in `sent/` at `sent_path`; called
    /// before `delivered` is journaled, so what it writes is on disk when
    /// that line is read.
    fn delivered(&mut self, _: &Duties, _: &Message, _: &Path) {}
    /// After `delivered` is journaled: what acts on a delivered message
    /// (a seat request's command) starts only then.
    fn after_delivered(&mut self, _: &Duties, _: &Message) {}
    /// After each pass. True when the feature queued a file (another pass is
    /// due).
    fn after_pass(&mut self, _: &Duties, _: Pass) -> bool {
        false
    }
    /// Every `FEATURE_POLL` (a fraction of a second), between passes. True
    /// when a file was queued.
    fn poll(&mut self, _: &Duties) -> bool {
        false
    }
    /// With the daemon's periodic sweep (`daemon.sweep`). True when a file
    /// was queued.
    fn sweep(&mut self, _: &Duties) -> bool {
        false
    }
    /// Work that may take seconds (tmux, a hung server): run on the agents'
    /// check thread every `daemon.pane_check`, before the watchdog's look,
    /// and once at the end of a `--once` run.
    fn off_loop(&self) -> Option<OffLoop> {
        None
    }
}

/// The registered features, in the order they are called. Itself a
/// [`Feature`]: a decision is the first feature's that does not let the
/// message through; every other hook reaches every feature.
#[derive(Default)]
pub struct Features(Vec<Box<dyn Feature>>);

impl Features {
    /// Registers `f` after those registered so far.
    pub fn with(mut self, f: impl Feature + 'static) -> Self {
        self.0.push(Box::new(f));
        self
    }

    /// Calls `f` on every feature; true when any returned true (none is
    /// skipped).
    fn any(&mut self, mut f: impl FnMut(&mut dyn Feature) -> bool) -> bool {
        self.0.iter_mut().fold(false, |due, x| f(x.as_mut()) | due)
    }
}

impl Feature for Features {
    fn resume(&mut self, d: &Duties) {
        self.0.iter_mut().for_each(|f| f.resume(d));
    }
    fn start(&mut self, d: &Duties) {
        self.0.iter_mut().for_each(|f| f.start(d));
    }
    fn refuse(&mut self, d: &Duties, msg: &Message) -> Option<String> {
        self.0.iter_mut().find_map(|f| f.refuse(d, msg))
    }
    fn admit(&mut self, d: &Duties, msg: &Message) -> Admission {
        self.0
            .iter_mut()
            .map(|f| f.admit(d, msg))
            .find(|a| *a != Admission::Admit)
            .unwrap_or(Admission::Admit)
    }
    fn before_sent(&mut self, d: &Duties, msg: &Message) -> Result<()> {
        self.0.iter_mut().try_for_each(|f| f.before_sent(d, msg))
    }
    fn delivered(&mut self, d: &Duties, msg: &Message, sent_path: &Path) {
        self.0
            .iter_mut()
            .for_each(|f| f.delivered(d, msg, sent_path));
    }
    fn after_delivered(&mut self, d: &Duties, msg: &Message) {
        self.0.iter_mut().for_each(|f| f.after_delivered(d, msg));
    }
    fn after_pass(&mut self, d: &Duties, pass: Pass) -> bool {
        self.any(|f| f.after_pass(d, pass))
    }
    fn poll(&mut self, d: &Duties) -> bool {
        self.any(|f| f.poll(d))
    }
    fn sweep(&mut self, d: &Duties) -> bool {
        self.any(|f| f.sweep(d))
    }
    fn off_loop(&self) -> Option<OffLoop> {
        let work: Vec<OffLoop> = self.0.iter().filter_map(|f| f.off_loop()).collect();
        (!work.is_empty()).then(|| -> OffLoop {
            Box::new(move |project: &Project, roles: &Roles, journal: &Journal| {
                work.into_iter().for_each(|w| w(project, roles, journal))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A scripted feature: says `word` at every hook it is asked, and
    /// answers what it was told to.
    struct Scripted {
        name: &'static str,
        said: Arc<Mutex<Vec<String>>>,
        admission: fn() -> Admission,
        refusal: Option<&'static str>,
        record: std::result::Result<(), &'static str>,
        queued: bool,
    }

    impl Scripted {
        fn new(name: &'static str, said: &Arc<Mutex<Vec<String>>>) -> Scripted {
            Scripted {
                name,
                said: said.clone(),
                admission: || Admission::Admit,
                refusal: None,
                record: Ok(()),
                queued: false,
            }
        }
        fn say(&self, hook: &str) {
            self.said
                .lock()
                .unwrap()
                .push(format!("{} {hook}", self.name));
        }
    }

    impl Feature for Scripted {
        fn resume(&mut self, _: &Duties) {
            self.say("resume");
        }
        fn refuse(&mut self, _: &Duties, _: &Message) -> Option<String> {
            self.say("refuse");
            self.refusal.map(str::to_string)
        }
        fn admit(&mut self, _: &Duties, _: &Message) -> Admission {
            self.say("admit");
            (self.admission)()
        }
        fn before_sent(&mut self, _: &Duties, _: &Message) -> Result<()> {
            self.say("before_sent");
            self.record.map_err(crate::error::Error::process)
        }
        fn after_pass(&mut self, _: &Duties, _: Pass) -> bool {
            self.say("after_pass");
            self.queued
        }
        fn sweep(&mut self, _: &Duties) -> bool {
            self.say("sweep");
            self.queued
        }
        fn off_loop(&self) -> Option<OffLoop> {
            let (said, name) = (self.said.clone(), self.name);
            Some(Box::new(move |_: &Project, _: &Roles, _: &Journal| {
                said.lock().unwrap().push(format!("{name} off_loop"))
            }))
        }
    }

    fn with_duties(f: impl FnOnce(&Duties, &Message)) {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::new(dir.path());
        let journal = Journal::new(&project);
        let waker = Waker::new(project.clone(), journal.clone());
        let (roles, config) = (Roles::parse(""), Config::default());
        let duties = Duties {
            project: &project,
            roles: &roles,
            config: &config,
            journal: &journal,
            waker: &waker,
        };
        let msg = Message::parse("id: 1\nfrom: a\nto: b\n\nhi\n").unwrap();
        f(&duties, &msg);
    }

    fn said(s: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
        std::mem::take(&mut *s.lock().unwrap())
    }

    #[test]
    fn every_feature_is_called_in_the_order_registered() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut fs = Features::default()
            .with(Scripted::new("a", &log))
            .with(Scripted::new("b", &log));
        with_duties(|d, msg| {
            fs.resume(d);
            assert_eq!(fs.refuse(d, msg), None);
            assert_eq!(fs.admit(d, msg), Admission::Admit);
            assert!(fs.before_sent(d, msg).is_ok());
        });
        assert_eq!(
            said(&log),
            [
                "a resume",
                "b resume",
                "a refuse",
                "b refuse",
                "a admit",
                "b admit",
                "a before_sent",
                "b before_sent"
            ]
        );
        let work = fs.off_loop().expect("work off the loop");
        with_duties(|d, _| work(d.project, d.roles, d.journal));
        assert_eq!(said(&log), ["a off_loop", "b off_loop"]);
    }

    #[test]
    fn the_first_feature_that_stops_a_message_decides() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut a = Scripted::new("a", &log);
        a.refusal = Some("no seat");
        a.admission = || Admission::Wait("a turn".into());
        a.record = Err("disk full");
        let mut b = Scripted::new("b", &log);
        b.refusal = Some("never asked");
        b.admission = || Admission::Refuse("never asked".into());
        let mut fs = Features::default().with(a).with(b);
        with_duties(|d, msg| {
            assert_eq!(fs.refuse(d, msg).as_deref(), Some("no seat"));
            assert_eq!(fs.admit(d, msg), Admission::Wait("a turn".into()));
            assert_eq!(fs.before_sent(d, msg).unwrap_err().to_string(), "disk full");
        });
        assert_eq!(said(&log), ["a refuse", "a admit", "a before_sent"]);
    }

    #[test]
    fn a_queued_file_from_one_feature_still_lets_the_others_run() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut a = Scripted::new("a", &log);
        a.queued = true;
        let mut fs = Features::default().with(a).with(Scripted::new("b", &log));
        with_duties(|d, _| {
            let pass = Pass {
                first: true,
                moved: false,
            };
            assert!(fs.after_pass(d, pass));
            assert!(fs.sweep(d));
        });
        assert_eq!(
            said(&log),
            ["a after_pass", "b after_pass", "a sweep", "b sweep"]
        );
    }

    #[test]
    fn no_feature_lets_everything_through() {
        let mut fs = Features::default();
        with_duties(|d, msg| {
            assert_eq!(fs.refuse(d, msg), None);
            assert_eq!(fs.admit(d, msg), Admission::Admit);
            assert!(fs.before_sent(d, msg).is_ok());
            assert!(!fs.poll(d));
        });
        assert!(fs.off_loop().is_none());
    }
}
