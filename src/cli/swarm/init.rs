//! `swarm init [root]`: repository, worktrees, state folders, roles.tsv.

use std::path::PathBuf;

use crate::error::exit;
use crate::launch::init;
use crate::launch::plan::Plan;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Project root (default: the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// Start from an example: `trio` (Claude Code, Codex, Gemini CLI), or a
    /// demo swarm (pipeline, roundtable, forum); refused, writing nothing,
    /// when any of its files exists already (each one is named)
    #[arg(long, value_name = "NAME")]
    pub example: Option<String>,
    /// Print one JSON object (root, roles, source, changes) instead of text
    #[arg(long)]
    pub json: bool,
    #[arg(long, short, help = super::QUIET)]
    pub quiet: bool,
    /// Which of swarm.yaml's `hosts` this checkout is (kept in .swarmforge/host)
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
}

pub fn run(args: Args) -> i32 {
    let result = super::init_root(args.root.as_deref()).and_then(|root| {
        if let Some(name) = &args.example {
            crate::fsx::ensure_dirs(&[&root])
                .map_err(|e| crate::error::Error::io(root.display().to_string(), e))?;
            crate::launch::templates::write(name, &root)?;
        }
        if let Some(h) = &args.host {
            init::set_host(&crate::protocol::layout::Project::new(&root), h)?;
        }
        let plan = Plan::load(&root)?;
        for w in &plan.warnings {
            eprintln!("{w}");
        }
        // Worktrees are made one git call at a time: say so before the wait.
        if !args.quiet && !args.json {
            eprintln!(
                "swarm: initialising {} ({} roles from {})",
                plan.project.root.display(),
                plan.roles.len(),
                plan.source.path().display()
            );
        }
        let report = init::init(&plan)?;
        Ok((plan, report))
    });
    match result {
        Ok((plan, report)) if args.json => {
            crate::cli::emit_json(serde_json::json!({
                "root": plan.project.root,
                "roles": plan.roles.len(),
                "source": plan.source.path(),
                "changes": report.changes,
            }));
            exit::OK
        }
        Ok(_) if args.quiet => exit::OK,
        Ok((plan, report)) => {
            let mut text = String::new();
            for c in &report.changes {
                text.push_str(&format!("{c}\n"));
            }
            if report.changes.is_empty() {
                text.push_str(&format!(
                    "{} is up to date ({} roles from {})\n",
                    plan.project.root.display(),
                    plan.roles.len(),
                    plan.source.path().display()
                ));
            } else {
                text.push_str(&format!(
                    "initialised {} ({} roles from {})\n",
                    plan.project.root.display(),
                    plan.roles.len(),
                    plan.source.path().display()
                ));
            }
            crate::cli::out(&text);
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
