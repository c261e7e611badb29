//! `swarm init --example <name>`: a starting point for a new project. The
//! real-agent templates of `examples/agents/` (not run by the tests: they
//! need the CLIs), and every demo swarm of `examples/swarm/`.

use std::path::Path;

use crate::error::{Error, Result};
use crate::launch::demo::{self, Example};

pub const TEMPLATES: &[Example] = &[Example {
    name: "trio",
    about: "Claude Code plans, Codex codes, Gemini CLI reviews; a person answers questions",
    files: &[
        (
            "swarm.yaml",
            include_str!("../../examples/agents/trio/swarm.yaml"),
        ),
        (
            "README.md",
            include_str!("../../examples/agents/trio/README.md"),
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

/// Writes the example into `root`, refusing to replace a `swarm.yaml`.
pub fn write(name: &str, root: &Path) -> Result<()> {
    let ex = find(name)?;
    let yaml = root.join("swarm.yaml");
    if yaml.exists() {
        return Err(Error::conflict(format!(
            "{} already exists; `--example` writes a new project's swarm.yaml\n  hint: run it in an empty folder, or remove the file first",
            yaml.display()
        )));
    }
    demo::write_example(ex, root)
}
