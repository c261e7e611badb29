//! `swarm man <dir>`: man pages (section 1) for every binary and every
//! subcommand, generated from the clap definitions.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::error::{exit, IoContext, Result};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Writes <name>.1 into DIR (made if missing) for swarm, swarm-handoff, ready-next, \
done-current and handoffd, and swarm-<subcommand>.1 (swarm-session-start.1, ...) \
for each subcommand, then prints the paths written. Install them with e.g.
  swarm man ~/.local/share/man/man1 && man swarm-transcript
or read one in place: man -l DIR/swarm.1")]
pub struct Args {
    /// Folder to write the pages into
    #[arg(value_hint = clap::ValueHint::DirPath)]
    pub dir: PathBuf,
    /// Print one JSON object (the paths written) instead of text
    #[arg(long)]
    pub json: bool,
}

/// Every page as (file name, roff text).
pub fn pages() -> Result<Vec<(String, Vec<u8>)>> {
    fn walk(cmd: clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            walk(sub, out)?;
        }
        let man = clap_mangen::Man::new(cmd);
        let mut buf = Vec::new();
        man.render(&mut buf)
            .map_err(|e| crate::Error::internal(format!("cannot render a man page: {e}")))?;
        out.push((man.get_filename(), buf));
        Ok(())
    }
    let mut out = Vec::new();
    for cmd in crate::cli::commands() {
        // Built, subcommands get their display names (`swarm-init`).
        let mut cmd = cmd.disable_help_subcommand(true);
        cmd.build();
        walk(cmd, &mut out)?;
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn write_all(dir: &Path) -> Result<Vec<PathBuf>> {
    crate::fsx::ensure_dirs(&[dir]).at(dir)?;
    let mut written = Vec::new();
    for (name, text) in pages()? {
        let path = dir.join(name);
        crate::fsx::write_file(&path, &text).at(&path)?;
        written.push(path);
    }
    Ok(written)
}

pub fn run(args: Args) -> i32 {
    match write_all(&args.dir) {
        Ok(paths) => {
            if args.json {
                crate::cli::emit_json(json!({ "paths": paths }));
            } else {
                let text: String = paths.iter().map(|p| format!("{}\n", p.display())).collect();
                crate::cli::out(&text);
            }
            exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
