//! SwarmForge-named wrapper scripts (`swarm_handoff.sh`, `ready_for_next.sh`,
//! their `_task`/`_batch` forms, `stop_handoff_daemon.sh`): role prompts and the
//! wake text name these commands literally, so a swarm switches to our binaries
//! by putting one folder of wrappers first on PATH (docs/protocol.md §9).

use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::sys::shell::quote;

/// One wrapper: its file name, the binary it runs and the fixed leading arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shim {
    pub name: &'static str,
    pub binary: &'static str,
    pub args: &'static [&'static str],
}

const fn shim(name: &'static str, binary: &'static str, args: &'static [&'static str]) -> Shim {
    Shim { name, binary, args }
}

/// Every wrapper `swarm shims` writes. The done wrappers take nothing after
/// the completion and print `MAIL_WAITING` or `NO_TASK`, as SwarmForge's do
/// today; an agent on older prompts that stops there is woken again, since
/// untaken mail is re-woken (docs/swarmforge-compat.md §1).
pub const SHIMS: &[Shim] = &[
    shim("swarm_handoff.sh", "swarm-handoff", &[]),
    shim("ready_for_next.sh", "ready-next", &[]),
    shim("done_with_current.sh", "done-current", &["--mail-waiting"]),
    shim("ready_for_next_task.sh", "ready-next", &["--task"]),
    shim("ready_for_next_batch.sh", "ready-next", &["--batch"]),
    shim(
        "done_with_current_task.sh",
        "done-current",
        &["--task", "--mail-waiting"],
    ),
    shim(
        "done_with_current_batch.sh",
        "done-current",
        &["--batch", "--mail-waiting"],
    ),
    shim("stop_handoff_daemon.sh", "swarm", &["stop"]),
];

/// Mode of every wrapper.
pub const MODE: u32 = 0o755;

/// The wrapper text: `#!/bin/sh`, then `exec '<bin_dir>/<binary>' [args] "$@"`.
pub fn script(bin_dir: &str, shim: &Shim) -> String {
    let mut line = format!("exec {}", quote(&format!("{bin_dir}/{}", shim.binary)));
    for a in shim.args {
        line.push(' ');
        line.push_str(a);
    }
    format!("#!/bin/sh\n{line} \"$@\"\n")
}

/// The folder holding the running executable (the five binaries are installed
/// together, so the wrappers point next to `swarm`).
pub fn own_bin_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| Error::io("current executable", e))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| Error::internal(format!("Cannot tell the folder of {}", exe.display())))
}

/// Writes every wrapper into `dir` (which must exist) pointing at the binaries
/// in `bin_dir`; returns the written paths. Each file is published atomically
/// and then made executable; running it again rewrites the same content.
pub fn install(dir: &Path, bin_dir: &Path) -> Result<Vec<PathBuf>> {
    let dir_abs = dir.canonicalize().map_err(|_| missing_dir(dir))?;
    if !dir_abs.is_dir() {
        return Err(missing_dir(dir));
    }
    let Some(bin) = bin_dir.to_str() else {
        return Err(Error::bad_input(format!(
            "Cannot install shims: the binary folder {} is not valid UTF-8.",
            bin_dir.display()
        )));
    };
    for s in SHIMS {
        let target = bin_dir.join(s.binary);
        if !target.is_file() {
            return Err(Error::not_found(format!(
                "Cannot install shims: {} not found.\n  hint: install all five binaries (swarm-handoff, ready-next, done-current, handoffd, swarm) into one folder",
                target.display()
            )));
        }
    }
    let mut written = Vec::with_capacity(SHIMS.len());
    for s in SHIMS {
        let path = dir_abs.join(s.name);
        fsx::write_file(&path, script(bin, s).as_bytes()).at(&path)?;
        fsx::set_mode(&path, MODE).at(&path)?;
        written.push(path);
    }
    Ok(written)
}

fn missing_dir(dir: &Path) -> Error {
    let shown = std::env::current_dir()
        .map(|c| c.join(dir))
        .unwrap_or_else(|_| dir.to_path_buf());
    Error::bad_input(format!(
        "Cannot install shims: {} is not a directory.\n  hint: create it first, then put it first on PATH",
        shown.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_quotes_the_binary_and_forwards_arguments() {
        let s = shim("ready_for_next_task.sh", "ready-next", &["--task"]);
        assert_eq!(
            script("/opt/it's", &s),
            "#!/bin/sh\nexec '/opt/it'\"'\"'s/ready-next' --task \"$@\"\n"
        );
    }

    #[test]
    fn every_swarmforge_name_is_covered_once() {
        let mut names: Vec<&str> = SHIMS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 8);
    }
}
