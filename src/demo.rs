//! `swarm demo`: the example swarms of `examples/swarm/`, built into the
//! binary so an installed `swarm` can run them anywhere. A demo copies one
//! into a fresh directory and runs it headless until every queue is empty.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::init::Plan;
use crate::launch::{self, Outcome, UpOptions};

/// One runnable example swarm.
#[derive(Debug)]
pub struct Example {
    pub name: &'static str,
    pub about: &'static str,
    /// (path relative to the example folder, content)
    pub files: &'static [(&'static str, &'static str)],
}

pub const EXAMPLES: &[Example] = &[Example {
    name: "pipeline",
    about: "coder -> cleaner -> coder with git_handoffs over real commits; the cleaner works in batch mode",
    files: &[
        (
            "swarm.yaml",
            include_str!("../examples/swarm/pipeline/swarm.yaml"),
        ),
        (
            "tasks.txt",
            include_str!("../examples/swarm/pipeline/tasks.txt"),
        ),
        (
            "agents/coder.sh",
            include_str!("../examples/swarm/pipeline/agents/coder.sh"),
        ),
        (
            "agents/cleaner.sh",
            include_str!("../examples/swarm/pipeline/agents/cleaner.sh"),
        ),
        (
            "README.md",
            include_str!("../examples/swarm/pipeline/README.md"),
        ),
    ],
}];

/// Examples planned but not shipped yet, with the reason.
pub const LATER: &[(&str, &str)] = &[
    ("roundtable", "needs the clarify message type"),
    ("forum", "needs the post type and forum sessions"),
];

pub fn find(name: &str) -> Result<&'static Example> {
    if let Some(e) = EXAMPLES.iter().find(|e| e.name == name) {
        return Ok(e);
    }
    let known: Vec<&str> = EXAMPLES.iter().map(|e| e.name).collect();
    let later = LATER
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| format!(" ('{name}' is not available yet: it {why})"))
        .unwrap_or_default();
    Err(Error::env(format!(
        "Unknown example '{}'{later}.\n  hint: available: {}",
        crate::header::escape(name),
        known.join(", ")
    )))
}

/// Writes the example's files into `dir` (which must exist).
pub fn write_example(ex: &Example, dir: &Path) -> Result<()> {
    for (rel, content) in ex.files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fsx::ensure_dirs(&[parent]).at(parent)?;
        }
        fsx::write_file(&path, content.as_bytes()).at(&path)?;
    }
    Ok(())
}

/// A new, empty directory for the demo: `dir` when given (missing or
/// empty), else `$TMPDIR/swarm-demo-<name>-<time>-<pid>`.
pub fn demo_dir(name: &str, dir: Option<&Path>) -> Result<PathBuf> {
    let path = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::temp_dir().join(format!(
            "swarm-demo-{name}-{}-{}",
            chrono::Utc::now().format("%Y%m%dT%H%M%S"),
            std::process::id()
        )),
    };
    if path.exists() {
        let empty = std::fs::read_dir(&path).at(&path)?.next().is_none();
        if !empty {
            return Err(Error::env(format!(
                "{}: not empty\n  hint: give --dir a new or empty directory",
                path.display()
            )));
        }
    } else {
        fsx::ensure_dirs(&[&path]).at(&path)?;
    }
    path.canonicalize().at(&path)
}

/// What a demo run did.
#[derive(Debug)]
pub struct DemoRun {
    pub root: PathBuf,
    pub outcome: Outcome,
    pub elapsed: Duration,
}

/// Copies example `name` into a new directory and runs it headless until
/// idle or `timeout`.
pub fn run(
    name: &str,
    dir: Option<&Path>,
    timeout: Duration,
    say: &mut dyn FnMut(&str),
) -> Result<DemoRun> {
    let ex = find(name)?;
    let root = demo_dir(name, dir)?;
    say(&format!("example '{name}' copied to {}", root.display()));
    write_example(ex, &root)?;
    let start = Instant::now();
    let plan = Plan::load(&root)?;
    let opts = UpOptions {
        tmux: false,
        detach: false,
        until_idle: true,
        timeout: Some(timeout),
        stagger: None,
    };
    let outcome = launch::up(&plan, &opts, say)?;
    Ok(DemoRun {
        root,
        outcome,
        elapsed: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_parse() {
        for ex in EXAMPLES {
            let yaml = ex.files.iter().find(|(p, _)| *p == "swarm.yaml").unwrap().1;
            let c = crate::config::Config::parse(yaml).unwrap();
            assert!(!c.roles.is_empty(), "{}", ex.name);
            crate::init::validate_yaml_roles(&c.roles, yaml, Path::new("swarm.yaml")).unwrap();
        }
        assert!(find("forum")
            .unwrap_err()
            .to_string()
            .contains("not available yet"));
    }
}
