//! `swarm demo [name]`: run an example swarm headless in a new directory,
//! then show its transcript, its audit summary and where the files are.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::exit;
use crate::launch::demo;
use crate::protocol::duration::Dur;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Example to run
    #[arg(default_value = "pipeline")]
    pub name: String,
    /// Directory to run it in (new or empty; default: a new temporary one)
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Stop the run after this long
    #[arg(long, default_value = "120s", value_parser = super::up::parse_dur)]
    pub timeout: Dur,
    /// List the examples and exit
    #[arg(long)]
    pub list: bool,
    #[arg(long, short, help = super::QUIET)]
    pub quiet: bool,
}

/// Runs `swarm <sub> <root>` (this executable) and prints its output under a
/// heading; the transcript and audit code is used through its CLI only.
fn section(title: &str, sub: &str, root: &Path) -> bool {
    crate::cli::out(&format!("\n== {title} ==\n"));
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("swarm demo: cannot find this executable: {e}");
            return false;
        }
    };
    match Command::new(exe)
        .arg(sub)
        .arg(root)
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) => {
            crate::cli::out(&String::from_utf8_lossy(&o.stdout));
            if !o.stderr.is_empty() {
                eprint!("{}", String::from_utf8_lossy(&o.stderr));
            }
            o.status.success()
        }
        Err(e) => {
            eprintln!("swarm demo: cannot run swarm {sub}: {e}");
            false
        }
    }
}

fn commits(root: &Path) {
    let o = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["log", "--oneline", "--graph", "--all", "-n", "20"])
        .stdin(Stdio::null())
        .output();
    if let Ok(o) = o {
        if o.status.success() {
            crate::cli::out(&format!(
                "\n== commits ==\n{}",
                String::from_utf8_lossy(&o.stdout)
            ));
        }
    }
}

pub fn run(args: Args) -> i32 {
    if args.list {
        let mut text = String::new();
        for e in demo::EXAMPLES {
            text.push_str(&format!("{:<12} {}\n", e.name, e.about));
        }
        for (n, why) in demo::LATER {
            text.push_str(&format!("{n:<12} (not yet: {why})\n"));
        }
        crate::cli::out(&text);
        return exit::OK;
    }
    let quiet = args.quiet;
    let mut say = |line: &str| {
        if !quiet {
            crate::cli::out(&format!("swarm: {line}\n"))
        }
    };
    let run = match demo::run(&args.name, args.dir.as_deref(), args.timeout.0, &mut say) {
        Ok(r) => r,
        Err(e) => return crate::cli::report(&e, false),
    };
    let root = &run.root;
    let mut code = run.outcome.exit_code();
    match &run.outcome {
        launch_outcome @ (crate::launch::Outcome::Idle | crate::launch::Outcome::Stopped) => {
            let word = if *launch_outcome == crate::launch::Outcome::Idle {
                "finished"
            } else {
                "was stopped"
            };
            crate::cli::out(&format!(
                "swarm: the demo {word} after {:.1} s\n",
                run.elapsed.as_secs_f64()
            ))
        }
        crate::launch::Outcome::TimedOut => eprintln!(
            "swarm demo: not finished after {}; the swarm was stopped",
            args.timeout
        ),
        crate::launch::Outcome::Stalled(why) => eprintln!("swarm demo: stalled: {why}"),
        crate::launch::Outcome::NoAgentStarted(why) => eprintln!("swarm demo: {why}"),
        crate::launch::Outcome::DaemonDied => eprintln!(
            "swarm demo: handoffd stopped unexpectedly; see {}",
            crate::protocol::layout::Project::new(root)
                .daemon_output()
                .display()
        ),
        crate::launch::Outcome::Detached => {}
    }
    if !section("transcript", "transcript", root) {
        code = exit::ENV;
    }
    if !section("audit", "audit", root) {
        code = exit::ENV;
    }
    commits(root);
    let project = crate::protocol::layout::Project::new(root);
    crate::cli::out(&format!(
        "\n== files ==\n\
         project:     {root}\n\
         roles:       {roles}\n\
         handoffs:    <worktree>/.swarmforge/handoffs/ (sent/, inbox/completed/, ...) in {root} and {root}/.worktrees/*\n\
         daemon log:  {log}\n\
         agent logs:  {agents}\n\
         run again:   cd {root} && swarm up --no-tmux --until-idle\n",
        root = root.display(),
        roles = project.roles_tsv().display(),
        log = project.log_file().display(),
        agents = crate::launch::agents_dir(&project).display(),
    ));
    code
}
