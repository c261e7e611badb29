//! One headless turn of a preset agent (`swarm turn --role R`, what a
//! headless role's supervisor or tmux pane runs; docs/headless.md): the
//! CLI runs once, non-interactively, in the role's worktree, resuming the
//! role's conversation, and its JSON event stream is read line by line
//! into the role's session file, activity file and the usage journal.
//! This reader runs outside the sandbox and confines only the CLI
//! (launch/confine/): the telemetry is not the agent's to write.
//!
//! No terminal, no keystrokes, no trust dialog. The stream is untrusted:
//! every line is bounded ([`MAX_LINE`]); a line too long, not UTF-8, not
//! JSON, or an event type we do not know is skipped and counted in a note
//! at the turn's end, and nothing a CLI prints stops the turn or corrupts
//! a file (each record is one bounded append).
//!
//! Here: which role and preset, its primer, and the turn itself, run
//! again in a new conversation when the CLI refuses the resume. One run
//! of the CLI is run.rs; the reading of its stream, reader.rs; the
//! running totals some CLIs report, totals.rs.

mod reader;
mod run;
mod totals;

use std::path::Path;

use crate::daemon::journal::{self, Event as JournalEvent};
use crate::error::{Error, Result};
use crate::fsx;
use crate::launch::agent_session;
use crate::launch::agents::{Cli, Launch};
use crate::launch::command::instructions_in_file;
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};
use crate::protocol::launch_files::prompt_file;
use crate::protocol::layout::Project;
use crate::telemetry::activity::{self, Activity, Kind};

/// The largest primer read (a primer is a few kB; not a message).
const MAX_PRIMER: u64 = 1024 * 1024;
/// The longest stream line read; the rest of a longer one is skipped.
pub const MAX_LINE: usize = 1024 * 1024;

/// How a turn went.
#[derive(Clone, Debug, Default)]
pub struct Turn {
    /// The CLI's exit code (None: killed by a signal; also when no turn ran).
    pub code: Option<i32>,
    /// Whether the CLI ran at all (nothing waiting: no turn).
    pub ran: bool,
    /// A resume was refused and the turn ran again in a new conversation.
    pub started_fresh: bool,
    /// Lines skipped (too long, not UTF-8, not JSON) and unknown events.
    pub skipped: usize,
    pub unknown: usize,
}

/// The role's preset, or why it has none.
pub(crate) fn preset_role<'a>(plan: &'a Plan, role: &str) -> Result<(&'a PlannedRole, Cli)> {
    let r = plan.roles.iter().find(|r| r.name == role).ok_or_else(|| {
        Error::not_found(format!(
            "role '{role}' is not in {}",
            plan.source.path().display()
        ))
    })?;
    match &r.agent {
        AgentSpec::Preset { cli, .. } => Ok((r, *cli)),
        _ => Err(Error::bad_input(format!(
            "role '{role}' does not run a preset agent (claude, codex, gemini); a headless turn needs one\n  hint: set `agent: claude` (or codex, gemini) for it in {}",
            plan.source.path().display()
        ))),
    }
}

/// The role's primer file and its text (bounded).
pub(crate) fn primer(project: &Project, role: &str) -> Result<(std::path::PathBuf, String)> {
    let pf = prompt_file(project, role);
    let primer = fsx::read_bounded(&pf, MAX_PRIMER)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|_| {
            Error::bad_file_hint(&pf, "the role's primer is missing", "`swarm up` writes it")
        })?;
    Ok((pf, primer))
}

/// What the preset `cli` of `r` needs to build its command line (both a
/// headless turn and an ACP agent, launch/acp/).
pub(crate) fn launch_of<'a>(
    plan: &'a Plan,
    r: &'a PlannedRole,
    cli: Cli,
    pf: &'a Path,
) -> Launch<'a> {
    let (model, args, permission) = match &r.agent {
        AgentSpec::Preset {
            model,
            args,
            permission,
            ..
        } => (model.as_deref(), &args[..], *permission),
        _ => (None, &[][..], Default::default()),
    };
    Launch {
        role: &r.name,
        root: &plan.project.root,
        worktree: &r.worktree_path,
        prompt_file: pf,
        model,
        args,
        permission,
        instructions_in_file: instructions_in_file(cli, r),
        mcp: plan.config.role(&r.name).is_some_and(|c| c.mcp),
        confined: crate::launch::confine::enabled(plan),
    }
}

/// Runs one turn for `role` if work waits for it (new items or one in
/// process); says what it does through `say`.
pub fn turn(root: &Path, role: &str, say: &mut dyn FnMut(&str)) -> Result<Turn> {
    let plan = Plan::load(root)?;
    let project = &plan.project;
    let (r, cli) = preset_role(&plan, role)?;
    let wt = r.worktree();
    if !crate::launch::supervisor::pending(&wt) {
        say(&format!("{role}: no work waits; no turn"));
        return Ok(Turn::default());
    }
    // A parked role starts no turn; its item stays where it is until a
    // raise or the next period (docs/cost.md, "Budgets").
    if let Some(why) = crate::telemetry::budget::parked(project, role) {
        say(&format!(
            "{role}: parked, the budget of {} is used up; no turn (`swarm budget raise` lets it go on)",
            why.budget_of
        ));
        return Ok(Turn::default());
    }
    let (pf, primer) = primer(project, role)?;
    let launch = launch_of(&plan, r, cli, &pf);
    let mut out = Turn::default();
    loop {
        let resume = agent_session::read(project, role, cli);
        let prompt = launch.turn_prompt(resume.is_some(), &primer);
        // The CLI alone is confined: this reader, which writes the
        // telemetry, runs outside the sandbox (launch/confine/).
        let command = crate::launch::confine::wrap_shell(
            &plan,
            r,
            &cli.preset().turn(&launch, resume.as_deref(), &prompt),
        )?;
        let max_bytes = plan.config.limits.max_file_bytes;
        let run = run::run_once(project, r, cli, &command, resume.as_deref(), max_bytes, say)?;
        out.ran = true;
        out.code = run.code;
        out.skipped += run.skipped;
        out.unknown += run.unknown;
        let Some(old) = resume.filter(|_| run.refused_resume()) else {
            return Ok(out);
        };
        start_fresh(project, role, cli, &old, say)?;
        out.started_fresh = true;
    }
}

/// The CLI no longer knows the conversation `old`: the role's session is
/// forgotten, so the next run starts a new one, and that is said (to the
/// person, in the journal and in the role's activity).
fn start_fresh(
    project: &Project,
    role: &str,
    cli: Cli,
    old: &str,
    say: &mut dyn FnMut(&str),
) -> Result<()> {
    agent_session::forget(project, role)?;
    let why = format!(
        "the {} CLI refused to resume session {old}; this turn starts a new conversation",
        cli.name()
    );
    say(&format!("{role}: {why}"));
    journal::record_outside(
        project,
        &JournalEvent::new(journal::Kind::ResumeRefused)
            .recipient(role)
            .reason(crate::text::escape(&why)),
    );
    let _ = activity::append(project, &Activity::now(role, Kind::Note).text(&why));
    Ok(())
}
