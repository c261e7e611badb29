//! `swarm init --example <name>`: a starting point for a new project. The
//! real-agent templates of `examples/agents/` (not run by the tests: they
//! need the CLIs), and every demo swarm of `examples/swarm/`.

use std::path::Path;

use crate::error::{Error, IoContext, Result};
use crate::launch::demo::{self, Example};

pub const TEMPLATES: &[Example] = &[Example {
    name: "trio",
    about: "Claude Code plans, Codex codes, Gemini CLI reviews; a person answers questions",
    files: &[
        (
            "swarm.yaml",
            include_str!("../../../../examples/agents/trio/swarm.yaml"),
        ),
        (
            "README.md",
            include_str!("../../../../examples/agents/trio/README.md"),
        ),
    ],
}];

pub fn find(name: &str) -> Result<&'static Example> {
    if let Some(t) = TEMPLATES.iter().find(|t| t.name == name) {
        return Ok(t);
    }
    demo::find(name).map_err(|_| {
        let mut known: Vec<&str> = TEMPLATES.iter().map(|t| t.name).collect();
        known.extend(demo::EXAMPLES.iter().map(|e| e.name));
        Error::not_found(format!(
            "Unknown example '{}'.\n  hint: available: {}",
            crate::text::escape(name),
            known.join(", ")
        ))
    })
}

/// Writes the example into `root`, never over a file of the user's: when
/// any of its files is there already (tracked, untracked, even identical),
/// or a folder on its way is not a plain folder, nothing is written and
/// every such path is named (exit 1, as for a non-empty `swarm demo --dir`).
/// Each file is published without clobbering, so one that appears after the
/// check is not replaced either.
pub fn write(name: &str, root: &Path) -> Result<()> {
    let ex = find(name)?;
    let in_the_way = in_the_way(ex, root);
    if !in_the_way.is_empty() {
        let mut msg = format!(
            "`swarm init --example {}` would replace {} of your files, so it wrote nothing:",
            ex.name,
            in_the_way.len()
        );
        for (path, why) in &in_the_way {
            msg.push_str(&format!(
                "\n  {} {why}",
                crate::text::escape(&path.to_string_lossy())
            ));
        }
        msg.push_str("\n  hint: run it in an empty folder, or move these away first; `--example` writes a new project's files");
        return Err(Error::conflict(msg));
    }
    for (rel, content) in ex.files {
        let path = root.join(rel);
        let parent = path.parent().unwrap_or(root);
        crate::fsx::ensure_dirs(&[parent]).at(parent)?;
        crate::fsx::publish(parent, &path, content.as_bytes()).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::conflict(format!(
                    "{} already exists (it appeared while the example was written); left as it is\n  hint: move it away and run `swarm init --example {}` again",
                    path.display(),
                    ex.name
                ))
            } else {
                Error::io(path.display().to_string(), e)
            }
        })?;
    }
    Ok(())
}

/// The paths under `root` the example would replace or write through, each
/// with why: a file (or anything) at one of its paths, or a folder on the
/// way that is a file or a symbolic link.
fn in_the_way(ex: &Example, root: &Path) -> Vec<(std::path::PathBuf, &'static str)> {
    let mut out: Vec<(std::path::PathBuf, &'static str)> = Vec::new();
    for (rel, _) in ex.files {
        let mut at = root.to_path_buf();
        let parts: Vec<_> = Path::new(rel).components().collect();
        for (i, c) in parts.iter().enumerate() {
            at.push(c);
            let last = i + 1 == parts.len();
            let why = match std::fs::symlink_metadata(&at) {
                Err(_) => break,
                Ok(_) if last => "already exists",
                Ok(m) if m.file_type().is_symlink() => {
                    "is a symbolic link where the example needs a folder"
                }
                Ok(m) if !m.is_dir() => "is in the way: the example needs a folder there",
                Ok(_) => continue,
            };
            if !out.iter().any(|(p, _)| *p == at) {
                out.push((at.clone(), why));
            }
            break;
        }
    }
    out.sort();
    out
}
