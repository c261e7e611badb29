//! `swarm demo`: the example swarms of `examples/swarm/`, built into the
//! binary so an installed `swarm` can run them anywhere. A demo copies one
//! into a fresh directory and runs it headless until every queue is empty.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::launch::plan::Plan;
use crate::launch::{self, Outcome, UpOptions};

/// One runnable example swarm.
#[derive(Debug)]
pub struct Example {
    pub name: &'static str,
    pub about: &'static str,
    /// (path relative to the example folder, content)
    pub files: &'static [(&'static str, &'static str)],
}

/// `(relative path, content)` of an example file, embedded at build time.
macro_rules! file {
    ($example:literal, $rel:literal) => {
        (
            $rel,
            include_str!(concat!("../../../../examples/swarm/", $example, "/", $rel)),
        )
    };
}

pub const EXAMPLES: &[Example] = &[
    Example {
        name: "pipeline",
        about: "coder -> cleaner -> coder with git_handoffs over real commits; the cleaner works in batch mode",
        files: &[
            file!("pipeline", "swarm.yaml"),
            file!("pipeline", "tasks.txt"),
            file!("pipeline", "agents/coder.sh"),
            file!("pipeline", "agents/cleaner.sh"),
            file!("pipeline", "README.md"),
        ],
    },
    Example {
        name: "roundtable",
        about: "a coordinator asks three seats; one asks the owner a clarify; the round closes with consensus",
        files: &[
            file!("roundtable", "swarm.yaml"),
            file!("roundtable", "agents/coordinator.sh"),
            file!("roundtable", "agents/seat.sh"),
            file!("roundtable", "agents/owner.sh"),
            file!("roundtable", "README.md"),
        ],
    },
    Example {
        name: "forum",
        about: "three speakers in a round-robin discussion inside a forum session, digested by a moderator",
        files: &[
            file!("forum", "swarm.yaml"),
            file!("forum", "agents/speaker.sh"),
            file!("forum", "agents/moderator.sh"),
            file!("forum", "lines/ada.txt"),
            file!("forum", "lines/ben.txt"),
            file!("forum", "lines/cy.txt"),
            file!("forum", "README.md"),
        ],
    },
];

/// Examples planned but not shipped yet, with the reason.
pub const LATER: &[(&str, &str)] = &[];

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
    Err(Error::not_found(format!(
        "Unknown example '{}'{later}.\n  hint: available: {}",
        crate::text::escape(name),
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
        let empty = fsx::is_empty_dir(&path).at(&path)?;
        if !empty {
            return Err(Error::bad_file_hint(
                &path,
                "not empty",
                "give --dir a new or empty directory",
            ));
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
    let mut plan = Plan::load(&root)?;
    // The demo's agents are the example's own scripts in a fresh folder:
    // on a machine that cannot confine, they run unconfined, said plainly
    // (a swarm of the person's own stops instead: docs/security.md).
    if launch::confine::needed(&plan) {
        if let Some(p) = launch::confine::probe() {
            say(&format!(
                "note: {}\n  the demo's scripted agents run unconfined; your own swarms will stop here until you repair it: {}",
                p.message, p.fix
            ));
            plan.config.launch.confine = false;
        }
    }
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
            let c = crate::protocol::config::Config::parse(yaml).unwrap();
            assert!(!c.roles.is_empty(), "{}", ex.name);
            crate::launch::plan::validate_yaml_roles(&c.roles, yaml, Path::new("swarm.yaml"))
                .unwrap();
        }
        assert!(find("nope")
            .unwrap_err()
            .to_string()
            .contains("available: pipeline, roundtable, forum"));
    }

    /// Every file of an example folder is embedded, byte for byte.
    #[test]
    fn examples_embed_every_file() {
        fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    walk(base, &e.path(), out);
                } else {
                    let rel = e.path().strip_prefix(base).unwrap().display().to_string();
                    out.push(rel);
                }
            }
        }
        for ex in EXAMPLES {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/swarm")
                .join(ex.name);
            let mut on_disk = Vec::new();
            walk(&dir, &dir, &mut on_disk);
            on_disk.sort();
            let mut embedded: Vec<String> = ex.files.iter().map(|(p, _)| p.to_string()).collect();
            embedded.sort();
            assert_eq!(on_disk, embedded, "{}", ex.name);
            for (rel, content) in ex.files {
                assert_eq!(std::fs::read_to_string(dir.join(rel)).unwrap(), *content);
            }
        }
    }
}
