//! `swarm up [root]`: init, handoffd, one agent per role (tmux or headless).

use std::path::PathBuf;

use crate::launch::plan::Plan;
use crate::launch::{self, Outcome, UpOptions};
use crate::protocol::duration::Dur;
use crate::protocol::swarm::Swarm;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Project root (default: the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// Run each agent as a supervised background process instead of a tmux
    /// session (machines without tmux, CI)
    #[arg(long)]
    pub no_tmux: bool,
    /// Start everything and return; `swarm down` stops it later
    #[arg(short, long, conflicts_with = "until_idle")]
    pub detach: bool,
    /// With --no-tmux: stop the swarm and return once every queue is empty
    /// and no agent runs; exit 3 when it stops with a question or mail
    /// waiting for a person (listed on stderr)
    #[arg(long, requires = "no_tmux")]
    pub until_idle: bool,
    /// Stop the swarm after this long (e.g. 90s, 10m) and exit 1
    #[arg(long, value_parser = parse_dur)]
    pub timeout: Option<Dur>,
    /// Pause between starting two agents (overrides launch.stagger)
    #[arg(long, value_parser = parse_dur)]
    pub stagger: Option<Dur>,
    #[arg(long, short, help = super::QUIET)]
    pub quiet: bool,
    /// First record folder trust for the worktrees in each coding CLI's
    /// store (as `swarm trust` does), so no trust dialog waits in a pane
    #[arg(long)]
    pub trust: bool,
}

pub fn parse_dur(s: &str) -> Result<Dur, crate::protocol::duration::BadDuration> {
    crate::protocol::duration::parse(s).map(Dur)
}

pub fn run(args: Args) -> i32 {
    let opts = UpOptions {
        tmux: !args.no_tmux,
        detach: args.detach,
        until_idle: args.until_idle,
        timeout: args.timeout.map(|d| d.0),
        stagger: args.stagger.map(|d| d.0),
    };
    let mut swarm = None;
    let result = super::up_root(args.root.as_deref()).and_then(|root| {
        let plan = Plan::load(&root)?;
        // The plan's swarm.yaml, for what is said when it ends; roles.tsv
        // is read then (`swarm init` writes it, a lineup change may alter it).
        swarm = Some(Swarm::with_config(
            plan.project.clone(),
            plan.config.clone(),
        ));
        for w in &plan.warnings {
            eprintln!("{w}");
        }
        check_agent_clis(&plan)?;
        if args.trust {
            launch::init::init(&plan)?;
            let changes = launch::trust::trust(&plan, &[], &launch::trust::Stores::from_env()?)?;
            super::trust::print(&changes, &mut |l| {
                if !args.quiet {
                    crate::cli::out(&format!("swarm: trust: {l}\n"))
                }
            });
        }
        launch::up(&plan, &opts, &mut |line: &str| {
            // A problem (an agent that died at start) is said even with -q.
            if line.starts_with("warning: ") {
                eprintln!("swarm: {line}");
            } else if !args.quiet {
                crate::cli::out(&format!("swarm: {line}\n"))
            }
        })
    });
    match result {
        Ok(outcome) => ended(&outcome, swarm.as_ref()),
        Err(e) => crate::cli::report(&e, false),
    }
}

/// The coding CLIs' own settings, checked before anything starts: a
/// Codex sandbox that would not run is warned of; a Claude Code that
/// refuses to run as root, or a Gemini CLI sandbox that cannot run,
/// refuses the start, each with its fix.
fn check_agent_clis(plan: &Plan) -> crate::error::Result<()> {
    for p in launch::agents::codex_sandbox::problems(plan, |k| std::env::var_os(k)) {
        eprintln!("warning: {}\n  hint: {}", p.message(), p.fix());
    }
    let refused =
        launch::agents::claude_root::problems(plan, launch::agents::claude_root::euid(), |k| {
            std::env::var_os(k)
        });
    let gemini = launch::agents::gemini_sandbox::problems(plan, |k| std::env::var_os(k));
    if refused.is_empty() && gemini.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = refused
        .iter()
        .map(|p| format!("{}\n  hint: {}", p.message(), p.fix()))
        .chain(
            gemini
                .iter()
                .map(|p| format!("{}\n  hint: {}", p.message(), p.fix())),
        )
        .collect();
    Err(crate::error::Error::conflict(format!(
        "not starting: {}",
        lines.join("\n")
    )))
}

/// Says how the swarm ended, on stderr, and returns the exit code.
fn ended(outcome: &Outcome, swarm: Option<&Swarm>) -> i32 {
    match outcome {
        Outcome::TimedOut => eprintln!("swarm up: timed out; the swarm was stopped"),
        Outcome::Stalled(why) => eprintln!("swarm up: stalled: {why}"),
        Outcome::DaemonDied => eprintln!("swarm up: handoffd stopped unexpectedly"),
        Outcome::NoAgentStarted(why) => eprintln!("swarm up: {why}"),
        Outcome::Idle => {
            if let Some(code) = swarm.and_then(people_waiting) {
                return code;
            }
        }
        _ => {}
    }
    outcome.exit_code()
}

/// An idle swarm that leaves questions or mail for a person says so, one
/// line each with the command that handles it, and exits 3.
fn people_waiting(swarm: &Swarm) -> Option<i32> {
    let items = crate::views::attention::collect_in(swarm).ok()?;
    if items.is_empty() {
        return None;
    }
    eprint!(
        "swarm up: idle, but {} item(s) wait for a person:\n{}",
        items.len(),
        crate::views::attention::text(&items)
    );
    Some(crate::error::exit::WAITING_FOR_PERSON)
}
