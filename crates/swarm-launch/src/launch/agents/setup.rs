//! What `swarm up` writes for agents before they start: each role's prompt
//! file (the primer; for SwarmForge's model agents SwarmForge's own lines
//! first), a preset's instruction block (`AGENTS.md`, `GEMINI.md`) and its
//! turn-end hook in the worktree's local settings for that CLI.

use std::path::Path;

use serde_json::Value;

use super::{hook_command, Cli};
use crate::error::{Error, Result};
use crate::fsx;
use crate::launch::command::{instructions_in_file, prompt_text};
use crate::launch::plan::{AgentSpec, Plan};
use crate::launch::primer::primer;
use crate::launch::repo::{add_excludes, write_if_changed};
use crate::protocol::launch_files::prompt_file;

/// Our block in an instruction file; the rest of the file is the project's.
pub const BEGIN: &str =
    "<!-- swarm-handoff: begin (written by `swarm up`; edits inside are replaced) -->";
pub const END: &str = "<!-- swarm-handoff: end -->";

/// Largest settings or instruction file read before merging into it.
pub(super) const MAX_FILE: u64 = 1024 * 1024;

/// `old` with our block replaced by (or, the first time, appended as) `body`.
pub fn with_block(old: &str, body: &str) -> String {
    let block = format!("{BEGIN}\n{}\n{END}\n", body.trim_end());
    match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if e > b => {
            let after = &old[e + END.len()..];
            format!(
                "{}{block}{}",
                &old[..b],
                after.strip_prefix('\n').unwrap_or(after)
            )
        }
        _ if old.trim().is_empty() => block,
        _ => {
            let sep = if old.ends_with('\n') { "\n" } else { "\n\n" };
            format!("{old}{sep}{block}")
        }
    }
}

fn read_text(path: &Path) -> Result<Option<String>> {
    match fsx::read_bounded(path, MAX_FILE) {
        Ok(b) => String::from_utf8(b).map(Some).map_err(|_| {
            Error::bad_file_hint(
                path,
                "not valid UTF-8",
                "fix or remove the file, then run `swarm up` again",
            )
        }),
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::bad_file_hint(
            path,
            format!("{e}"),
            "it must be a regular file under 1 MiB",
        )),
    }
}

/// The settings file with our hook merged in. A file that is not JSON is
/// refused, never overwritten: it may hold the person's own settings.
pub fn install_hook(cli: Cli, worktree: &Path, bin_dir: &Path) -> Result<bool> {
    let p = cli.preset();
    let path = worktree.join(p.hook_file());
    let existing = match read_text(&path)? {
        None => Value::Object(Default::default()),
        Some(t) if t.trim().is_empty() => Value::Object(Default::default()),
        Some(t) => serde_json::from_str(&t).map_err(|e| {
            Error::bad_file_hint(
                &path,
                format!("not valid JSON ({e})"),
                format!(
                    "repair it (or remove it) so `swarm up` can add its {} hook",
                    p.turn_end_event()
                ),
            )
        })?,
    };
    let merged = p.with_hook(existing, &hook_command(bin_dir, cli));
    let mut text = serde_json::to_string_pretty(&merged).unwrap_or_default();
    text.push('\n');
    write_if_changed(&path, text.as_bytes())
}

/// Writes every role's prompt file and, for presets, instruction blocks and
/// hooks. Returns notes for the person.
pub fn prepare(plan: &Plan, bin_dir: &Path) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let mut excludes: Vec<&'static str> = Vec::new();
    for r in &plan.roles {
        let pf = prompt_file(&plan.project, &r.name);
        match &r.agent {
            AgentSpec::Human | AgentSpec::Command(_) | AgentSpec::Api => continue,
            // SwarmForge's lines stay first and unchanged; the primer is added.
            AgentSpec::Model { .. } => {
                let text = format!("{}\n{}", prompt_text(&r.name), primer(plan, &r.name)?);
                write_if_changed(&pf, text.as_bytes())?;
            }
            AgentSpec::Preset { cli, .. } => {
                let text = primer(plan, &r.name)?;
                write_if_changed(&pf, text.as_bytes())?;
                if let Some(name) = cli.preset().instruction_file() {
                    if !r.in_root() && !instructions_in_file(*cli, r) {
                        notes.push(format!(
                            "{}: {name} is tracked by git, so the primer goes in the first prompt instead",
                            r.name
                        ));
                    }
                    if instructions_in_file(*cli, r) {
                        let path = r.worktree_path.join(name);
                        let old = read_text(&path)?.unwrap_or_default();
                        if write_if_changed(&path, with_block(&old, &text).as_bytes())? {
                            notes.push(format!("{}: instructions in {}", r.name, path.display()));
                        }
                        excludes.push(name);
                    }
                }
                // A Codex role outside `mcp: true` gets its hook on its
                // command line (agents/codex_hooks.rs).
                let on_command_line =
                    *cli == Cli::Codex && !plan.config.role(&r.name).is_some_and(|c| c.mcp);
                if on_command_line {
                    continue;
                }
                if install_hook(*cli, &r.worktree_path, bin_dir)? {
                    notes.push(format!(
                        "{}: turn-end hook in {}",
                        r.name,
                        r.worktree_path.join(cli.preset().hook_file()).display()
                    ));
                }
                excludes.push(cli.preset().hook_file());
            }
        }
    }
    // Untracked files of ours stay out of `git status` and `git add -A`
    // (a tracked file of the same name is not affected by an exclude).
    excludes.sort_unstable();
    excludes.dedup();
    if !excludes.is_empty() && plan.project.root.join(".git").exists() {
        let patterns: Vec<String> = excludes.iter().map(|e| format!("/{e}")).collect();
        let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
        if let Some(c) = add_excludes(&plan.project.root, &refs)? {
            notes.push(c);
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_replaced_and_the_rest_kept() {
        let first = with_block("# Project rules\nBe kind.\n", "primer v1");
        assert_eq!(
            first,
            format!("# Project rules\nBe kind.\n\n{BEGIN}\nprimer v1\n{END}\n")
        );
        let again = with_block(&first, "primer v2");
        assert_eq!(
            again,
            format!("# Project rules\nBe kind.\n\n{BEGIN}\nprimer v2\n{END}\n")
        );
        assert_eq!(with_block("", "p"), format!("{BEGIN}\np\n{END}\n"));
    }
}
