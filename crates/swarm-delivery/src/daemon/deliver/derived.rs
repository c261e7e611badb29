//! The files derived from delivered messages, written after a pass: the
//! board (crates/swarm-records/src/board/) and SwarmForge's request folders for the person
//! (`protocol::dashboard`).
//!
//! Delivery never waits for them and never fails for them: a pass notes
//! what it delivered that touches either, and writes them once at its end.
//! Invariant kept here: **a derivation that failed is due again** (logged
//! `deferred`, and the next pass derives the board from every file), and so
//! is the first pass of a process, since a crash may have left them behind.

use crate::daemon::journal::{Event, Journal, Kind};
use crate::protocol::clock;
use crate::protocol::config::Config;
use crate::protocol::header::{names, Message};
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;

pub(super) struct Derived {
    /// The board is to be derived from every file after this pass: the
    /// first pass and any pass after one whose write failed.
    board_full: bool,
    /// What this pass delivered that may move a card (a `task` header),
    /// with its time: all the board needs to fold in (board::sync_after).
    board_delivered: Vec<(Option<clock::Instant>, Message)>,
    /// This pass delivered a message the person's request files derive
    /// from (protocol::dashboard::touches): only then are they derived
    /// again, from every original.
    dashboard_due: bool,
}

impl Derived {
    pub(super) fn new() -> Derived {
        Derived {
            board_full: true,
            board_delivered: Vec::new(),
            dashboard_due: false,
        }
    }

    /// A message this pass delivered.
    pub(super) fn note(&mut self, roles: &Roles, msg: &Message) {
        if crate::protocol::dashboard::touches(roles, msg) {
            self.dashboard_due = true;
        }
        if msg.get(names::TASK).is_some() {
            let when = crate::board::when_of(msg);
            self.board_delivered.push((when, msg.clone()));
        }
    }

    /// At the end of a pass that delivered `delivered` files: the request
    /// folders (only in a project with a person) and the board, as due.
    pub(super) fn write(
        &mut self,
        project: &Project,
        roles: &Roles,
        config: &Config,
        journal: &Journal,
        delivered: usize,
    ) {
        if (std::mem::take(&mut self.dashboard_due) || self.board_full)
            && crate::protocol::dashboard::applies(roles)
        {
            let synced = crate::protocol::trail::Trail::load(
                project,
                &crate::protocol::trail::Scope::originals(),
            )
            .map_err(|e| e.to_string())
            .and_then(|t| crate::protocol::dashboard::sync(&t).map_err(|e| e.to_string()));
            if let Err(e) = synced {
                journal.record(
                    &Event::new(Kind::Deferred)
                        .path(&project.dashboard_dir())
                        .reason(format!("dashboard requests: {e}")),
                );
            }
        }
        let noted = std::mem::take(&mut self.board_delivered);
        if delivered > 0 || self.board_full {
            let full = std::mem::take(&mut self.board_full);
            // From the roles and swarm.yaml the daemon holds: a pass reads
            // no config file for a swarm without cards. The first pass
            // derives the board from every file; later ones fold in what
            // they delivered.
            let synced =
                crate::board::Routes::from_parts(project, roles, config).and_then(|routes| {
                    if full {
                        crate::board::sync(project, &routes)
                    } else {
                        crate::board::sync_after(project, &routes, &noted)
                    }
                });
            if let Err(e) = synced {
                self.board_full = true;
                journal.record(
                    &Event::new(Kind::Deferred)
                        .path(&crate::board::tasks_file(project))
                        .reason(format!("board: {e}")),
                );
            }
        }
    }
}
