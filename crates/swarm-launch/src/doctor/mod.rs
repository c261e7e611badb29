//! `swarm doctor`: a project's set-up checked as a whole, each finding with
//! a stable code, what is wrong and how to fix it (docs/doctor.md).
//!
//! The checks are independent functions in [`checks`], listed once in
//! [`CHECKS`]: each reads what it needs from a shared [`Context`] and returns
//! its findings; none changes anything. A check that cannot look (no git,
//! no tmux) says so as a finding of its own instead of passing silently.
//!
//! Doctor tells the truth in every state (issue 42): the context loads
//! whatever it can and never fails. A `swarm.yaml` or `roles.tsv` that does
//! not load is one `CONFIG_INVALID` finding (file:line:col) and the checks
//! that need it see nothing; every other check still runs. Before `swarm
//! init` there is a `NOT_INITIALISED` finding and the checks that need no
//! project (agent CLIs, the sandbox, tmux, disk) still run.

pub mod bridge_sync;
pub mod checks;
pub mod sandbox;
pub mod tmux;

use std::path::PathBuf;

use serde::Serialize;

use crate::launch::plan::Plan;
use crate::protocol::config::Config;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::protocol::trail::{Scope, Trail};

/// One problem: a stable code (`SHARED_INBOX`), what is wrong, the fix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: &'static str,
    pub message: String,
    pub fix: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

impl Finding {
    pub fn new(code: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Finding {
            code,
            message: message.into(),
            fix: fix.into(),
            path: None,
        }
    }

    pub fn at(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }
}

/// What every check may read, loaded once. Never fails: what does not load
/// is kept as its error (reported once, by the `config` check) and the
/// checks see an empty table or the defaults instead.
pub struct Context {
    pub project: Project,
    /// `swarm init` has made this project (`.swarmforge/roles.tsv` exists).
    pub initialised: bool,
    /// The role table; empty when it does not load (see `roles_error`).
    pub roles: Roles,
    pub roles_error: Option<crate::Error>,
    /// `swarm.yaml`; every default when it does not load (see `config_error`).
    pub config: Config,
    pub config_error: Option<crate::Error>,
    /// The plan from `swarm.yaml` / `swarmforge.conf`, or why it failed
    /// (when the config failed, the same text: `config_error` reports it).
    pub plan: std::result::Result<Plan, crate::Error>,
}

impl Context {
    pub fn load(project: &Project) -> Context {
        let roles_tsv = project.roles_tsv();
        let initialised = std::fs::symlink_metadata(&roles_tsv).is_ok();
        let (roles, roles_error) = match Roles::load(&roles_tsv) {
            Ok(r) => (r, None),
            Err(e) => (Roles::default(), Some(e)),
        };
        // swarm.yaml read once, for the config and the plan.
        let (config, config_error, plan) = match Config::load_with_text(&project.config_file()) {
            Ok((c, text)) => {
                let plan = Plan::from_loaded(project.clone(), c.clone(), &text);
                (c, None, plan)
            }
            Err(e) => {
                let why = crate::Error::bad_input(&e);
                (Config::default(), Some(e), Err(why))
            }
        };
        Context {
            project: project.clone(),
            initialised,
            roles,
            roles_error,
            config,
            config_error,
            plan,
        }
    }

    /// The whole trail, read with the role table and config loaded here;
    /// None when either does not load (the `config` check's finding).
    pub fn trail(&self) -> Option<crate::Result<Trail>> {
        if self.roles_error.is_some() || self.config_error.is_some() {
            return None;
        }
        Some(Trail::load_with(
            &self.project,
            &self.roles,
            &self.config,
            &Scope::all(),
        ))
    }
}

/// A check: its name (as `--json` reports it) and the function.
pub type Check = (&'static str, fn(&Context) -> Vec<Finding>);

/// Every check, in the order the report lists them.
pub const CHECKS: &[Check] = &[
    ("project", checks::project),
    ("config", checks::config),
    ("swarmforge_features", checks::swarmforge_features),
    ("shared_inbox", checks::shared_inbox),
    ("person_mail_elsewhere", checks::person_mail_elsewhere),
    ("launch_files_ignored", checks::launch_files_ignored),
    ("agent_cli_missing", checks::agent_cli_missing),
    ("agent_cli_trust", checks::agent_cli_trust),
    ("codex_sandbox_helper", checks::codex_sandbox_helper),
    ("confinement", sandbox::confinement),
    ("git_planted", sandbox::planted),
    ("git_objects", sandbox::objects),
    ("role_branch", checks::role_branch),
    ("commit_msg_hook", checks::commit_msg_hook),
    ("claude_full_as_root", checks::claude_full_as_root),
    ("gemini_sandbox_confined", checks::gemini_sandbox_confined),
    ("tmux_socket", tmux::tmux_socket),
    ("daemon", checks::daemon),
    ("logs", checks::logs),
    ("disk_space", checks::disk_space),
    ("clock_skew", checks::clock_skew),
    ("bridge_sync", bridge_sync::bridge_sync),
    ("audit", checks::audit),
];

/// One check's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    pub check: &'static str,
    pub findings: Vec<Finding>,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub root: PathBuf,
    pub healthy: bool,
    pub checks: Vec<CheckResult>,
}

/// Runs every check. `project` need not be initialised: before `swarm
/// init` the report says so and holds what could be checked.
pub fn run(project: &Project) -> crate::Result<Report> {
    let cx = Context::load(project);
    let checks: Vec<CheckResult> = CHECKS
        .iter()
        .map(|(name, f)| CheckResult {
            check: name,
            findings: f(&cx),
        })
        .collect();
    Ok(Report {
        root: project.root.clone(),
        healthy: checks.iter().all(|c| c.findings.is_empty()),
        checks,
    })
}

/// `ok <check>` per clean check, each finding as `CODE: message` and
/// `  fix: …`, then a summary line.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    let mut n = 0;
    for c in &r.checks {
        if c.findings.is_empty() {
            s.push_str(&format!("ok       {}\n", c.check));
        }
        for f in &c.findings {
            n += 1;
            s.push_str(&format!(
                "FINDING  {}: {}\n  fix: {}\n",
                f.code,
                crate::text::escape(&f.message),
                crate::text::escape(&f.fix)
            ));
        }
    }
    if n == 0 {
        s.push_str(&format!("healthy: {}\n", r.root.display()));
    } else {
        s.push_str(&format!("{n} finding(s) in {}\n", r.root.display()));
    }
    s
}
