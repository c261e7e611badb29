//! Budgets in the daemon (docs/cost.md, "Budgets"): each sweep, on a
//! thread of its own (it reads the usage journal, which must never slow a
//! delivery pass), the daemon asks which roles a budget parks and journals
//! each change once: `budget_reached` when a role is parked (notify.command
//! hears it), `budget_released` when a raise or a new period lets it go on,
//! and then wakes the role if mail waits for it. The wake path itself asks
//! again before every wake-up (wake.rs), so a parked role is never woken
//! between two sweeps either. What was reported lives in memory only: a
//! restarted daemon reports each parked role once more.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::journal::{Event, Journal, Kind};
use super::wake::{self, Waker};
use crate::protocol::config::Config;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::telemetry::budget;

/// The roles reported parked, with the words of their reason.
#[derive(Clone, Default)]
pub(super) struct Parking {
    reported: Arc<Mutex<HashMap<String, String>>>,
    running: Arc<AtomicBool>,
}

impl Parking {
    /// Starts one check unless one is still running; returns at once.
    pub(super) fn check(
        &self,
        project: &Project,
        roles: &Roles,
        cfg: &Config,
        journal: &Journal,
        waker: &Waker,
    ) {
        let budgets_set = cfg.budget.is_some() || cfg.roles.iter().any(|r| r.budget.is_some());
        if !budgets_set && self.lock().is_empty() {
            return;
        }
        if self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        let (project, roles, cfg) = (project.clone(), roles.clone(), cfg.clone());
        let (journal, waker) = (journal.clone(), waker.clone());
        std::thread::spawn(move || {
            me.run(&project, &roles, &cfg, &journal, &waker);
            me.running.store(false, Ordering::Release);
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.reported.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(
        &self,
        project: &Project,
        roles: &Roles,
        cfg: &Config,
        journal: &Journal,
        waker: &Waker,
    ) {
        // An unreadable journal or config parks nobody (budget::parked).
        let budgets = budget::load(project).unwrap_or_default();
        let method = wake::method(project, cfg);
        for role in roles
            .roles
            .iter()
            .filter(|r| !r.is_human() && !r.is_remote())
        {
            let now = budgets.parked(&role.name);
            let before = self.lock().get(&role.name).cloned();
            match (now, before) {
                (Some(why), None) => {
                    let words = why.words();
                    journal.record(
                        &Event::new(Kind::BudgetReached)
                            .recipient(&role.name)
                            .reason(format!("{words}; {}", why.handle())),
                    );
                    self.lock().insert(role.name.clone(), words);
                }
                (None, Some(_)) => {
                    journal.record(&Event::new(Kind::BudgetReleased).recipient(&role.name));
                    self.lock().remove(&role.name);
                    if role.wakes_here() && wake::still_waiting(&role.worktree_path) {
                        let wt = Worktree::new(&role.worktree_path);
                        waker.wake(wake::Request {
                            role: role.name.clone(),
                            session: role.session.clone(),
                            worktree: role.worktree_path.clone(),
                            path: wt.inbox_new(),
                            method: method.clone(),
                            rewake: true,
                        });
                    }
                }
                _ => {}
            }
        }
    }
}
