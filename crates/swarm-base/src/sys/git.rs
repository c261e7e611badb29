//! Running git without a person at hand: `git -C <dir> <args>`, stdin
//! closed and no terminal prompt (a credential prompt would hang a daemon or
//! a helper forever), output captured. What the answers mean is the
//! caller's: the commit checks of a `git_handoff` (`protocol::gitcheck`),
//! finding the project (`protocol::root`), the bridge's pushes, a role's
//! branch. The launcher's `launch::repo`, reservations and the demo still
//! start git themselves (with prompts allowed, for a person's `swarm
//! init`); moving them here is left to do.
//!
//! [`Pinned`] is git on the person's side in a checkout an agent can write
//! (docs/security.md, "What an agent can plant"): git reads where its
//! folders are from files in the checkout (a worktree's `.git` file, the
//! git folder's `commondir`), and a config it is pointed at can make it run
//! programs (`core.fsmonitor`, hooks). The invariant: every git the
//! person's side runs in an agent's checkout is pinned to the project's own
//! `.git` by environment, never by those files, with fsmonitor and hooks
//! off.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why git gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// git could not be started.
    #[error("cannot run git: {0}")]
    CannotRun(#[source] std::io::Error),
    /// git ran and failed: its stderr, or which command failed when it
    /// said nothing.
    #[error("{0}")]
    Failed(String),
    /// A bound passed (sys::child): git was killed, or could not run.
    #[error("git {what} {source}")]
    Bounded {
        what: String,
        source: super::child::ChildError,
    },
    /// The project's `.git` is not a real folder.
    #[error("{} is not a git folder", .0.display())]
    NotAGitFolder(PathBuf),
    /// No `.git/worktrees/<id>/gitdir` of the project names the checkout.
    #[error("{} is not a git worktree of {} (no .git/worktrees/<id>/gitdir names it)", dir.display(), root.display())]
    NotAWorktree { dir: PathBuf, root: PathBuf },
    /// No folder above the checkout has a real `.git` folder.
    #[error("{} is not in a git repository", .0.display())]
    NotInARepository(PathBuf),
}

/// git could not be run or failed: the library's callers of git have
/// nothing to add but the text (exit 1). Here, beside the cause, so the
/// error type of the floor below names nothing of this one.
impl From<GitError> for crate::error::Error {
    fn from(e: GitError) -> crate::error::Error {
        crate::error::Error::Process(e.to_string())
    }
}

/// What one git run said.
#[derive(Debug)]
pub struct Reply {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// `git -C <dir> <args>` with `env` added and no terminal prompt.
fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(dir)
        .args(args)
        .envs(env.iter().copied())
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null());
    c
}

/// Runs git in `dir` with `env` added; Err only when git could not be run.
pub fn call_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Reply, GitError> {
    run(command(dir, args, env))
}

/// Runs `git`; Err only when it could not be run.
fn run(mut git: Command) -> Result<Reply, GitError> {
    let out = git.output().map_err(GitError::CannotRun)?;
    Ok(Reply::of(out.status, &out.stdout, &out.stderr))
}

impl Reply {
    fn of(status: std::process::ExitStatus, stdout: &[u8], stderr: &[u8]) -> Reply {
        Reply {
            ok: status.success(),
            stdout: String::from_utf8_lossy(stdout).into_owned(),
            stderr: String::from_utf8_lossy(stderr).into_owned(),
        }
    }
}

/// Runs git in `dir`; Err only when git could not be run.
pub fn call(dir: &Path, args: &[&str]) -> Result<Reply, GitError> {
    call_with(dir, args, &[])
}

/// Runs git in `dir`: its trimmed stdout, or its stderr (or which command
/// failed, when it said nothing) as the error.
pub fn stdout(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    trimmed(call(dir, args)?, args)
}

/// `r`'s trimmed stdout, or its stderr (or which command failed, when it
/// said nothing) as the error.
fn trimmed(r: Reply, args: &[&str]) -> Result<String, GitError> {
    if r.ok {
        return Ok(r.stdout.trim().to_string());
    }
    let err = r.stderr.trim();
    Err(GitError::Failed(if err.is_empty() {
        format!("git {} failed", args.first().unwrap_or(&""))
    } else {
        err.to_string()
    }))
}

/// Config that would make git run a program, turned off for a [`Pinned`]
/// git: the fsmonitor hook and every hook (`reference-transaction` runs on
/// `update-ref`).
const NO_PROGRAMS: &[&str] = &[
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
];

/// git for the checkout `dir`, pinned to the project's own git folders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinned {
    dir: PathBuf,
    git_dir: PathBuf,
    common: PathBuf,
}

impl Pinned {
    /// The checkout `dir` of the project at `root` (the root itself, or a
    /// linked worktree of its `.git`).
    pub fn new(root: &Path, dir: &Path) -> Result<Pinned, GitError> {
        let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let (root, dir) = (canon(root), canon(dir));
        let common = root.join(".git");
        if !std::fs::symlink_metadata(&common).is_ok_and(|m| m.is_dir()) {
            return Err(GitError::NotAGitFolder(common));
        }
        let git_dir = if dir == root {
            common.clone()
        } else {
            linked_gitdir(&root, &dir)
                .map(|(_, gitdir)| gitdir)
                .ok_or_else(|| GitError::NotAWorktree {
                    dir: dir.clone(),
                    root: root.clone(),
                })?
        };
        Ok(Pinned {
            dir,
            git_dir,
            common,
        })
    }

    /// The checkout `dir`, its project found as the nearest folder above
    /// (or at) it whose `.git` is a real folder.
    pub fn find(dir: &Path) -> Result<Pinned, GitError> {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let root = dir
            .ancestors()
            .find(|a| std::fs::symlink_metadata(a.join(".git")).is_ok_and(|m| m.is_dir()))
            .ok_or_else(|| GitError::NotInARepository(dir.clone()))?;
        Pinned::new(root, &dir)
    }

    /// The pinned `git <args>` for the checkout.
    fn command(&self, args: &[&str]) -> Command {
        let git_dir = self.git_dir.to_string_lossy();
        let common = self.common.to_string_lossy();
        let work_tree = self.dir.to_string_lossy();
        let all: Vec<&str> = NO_PROGRAMS.iter().chain(args).copied().collect();
        command(
            &self.dir,
            &all,
            &[
                ("GIT_DIR", &git_dir),
                ("GIT_COMMON_DIR", &common),
                ("GIT_WORK_TREE", &work_tree),
            ],
        )
    }

    /// Runs git in the checkout; Err only when git could not be run.
    pub fn call(&self, args: &[&str]) -> Result<Reply, GitError> {
        run(self.command(args))
    }

    /// [`Pinned::call`] bounded (sys::child): git killed after `timeout`
    /// or once it printed more than `max_stdout` bytes, for a command whose
    /// time and output the checkout's contents decide (a listing of its
    /// files). Err says which bound it passed, or that git could not run.
    pub fn call_bounded(
        &self,
        args: &[&str],
        timeout: std::time::Duration,
        max_stdout: u64,
    ) -> Result<Reply, GitError> {
        let what = args.first().copied().unwrap_or("");
        let out = super::child::output_bounded(self.command(args), timeout, max_stdout).map_err(
            |source| GitError::Bounded {
                what: what.to_string(),
                source,
            },
        )?;
        Ok(Reply::of(out.status, &out.stdout, &out.stderr))
    }

    /// `git index-pack --stdin` of `pack` into the project's object store:
    /// git names every object by hashing its content, so a pack cannot
    /// bring an object in under another's id. Bounded as
    /// [`Pinned::call_bounded`]; Err says why it was not taken.
    pub fn index_pack(
        &self,
        pack: std::fs::File,
        timeout: std::time::Duration,
    ) -> Result<String, GitError> {
        let out = super::child::output_bounded_from(
            self.command(&["index-pack", "--stdin"]),
            Stdio::from(pack),
            timeout,
            4096,
        )
        .map_err(|source| GitError::Bounded {
            what: "index-pack".to_string(),
            source,
        })?;
        trimmed(
            Reply::of(out.status, &out.stdout, &out.stderr),
            &["index-pack"],
        )
    }

    /// [`Pinned::call`]: its trimmed stdout, or its stderr as the error.
    pub fn stdout(&self, args: &[&str]) -> Result<String, GitError> {
        trimmed(self.call(args)?, args)
    }
}

/// The git folder of the linked worktree `wt` of the project at `root`,
/// and its id: the folder in `<root>/.git/worktrees/` whose `gitdir` file
/// names `wt`'s `.git` (its own name first, else the one such folder), as
/// the project's side keeps it. Never taken from the worktree's `.git`
/// file, which is the agent's to write: pointed at another role's git
/// folder, or at a folder of its own with a config that runs a program, it
/// would have the person's side use that. None when no folder, or more
/// than one, names `wt`, or the folders are links.
pub fn linked_gitdir(root: &Path, wt: &Path) -> Option<(String, PathBuf)> {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let real = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let worktrees = root.join(".git/worktrees");
    if !real(&root.join(".git")) || !real(&worktrees) {
        return None;
    }
    let want = canon(&wt.join(".git"));
    let names = |id: &str| {
        let dir = worktrees.join(id);
        real(&dir)
            && crate::fsx::read_bounded(&dir.join("gitdir"), 4096)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .is_some_and(|t| canon(Path::new(t.trim())) == want)
    };
    let valid = |n: &str| {
        !n.is_empty()
            && !n.starts_with('.')
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    let own = wt
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| valid(n) && names(n))
        .map(str::to_string);
    let id = own.or_else(|| {
        let found: Vec<String> = crate::fsx::HeldDir::open(&worktrees)
            .and_then(|d| d.names())
            .unwrap_or_default()
            .into_iter()
            .filter(|n| valid(n) && names(n))
            .collect();
        <[String; 1]>::try_from(found).ok().map(|[one]| one)
    })?;
    let gitdir = worktrees.join(&id);
    Some((id, gitdir))
}

/// The `commondir` file in the project's own git folder (`<root>/.git`),
/// when there is one (whatever it is: a file, a link, a folder). git makes
/// one only in a linked worktree's git folder; in the project's, the
/// person's git in the project would follow it to another folder's config
/// and hooks (an fsmonitor, a `reference-transaction` hook) and run them.
/// An agent working in the project root can write `.git`, so it can plant
/// one: the sandbox refuses to start, handoffd moves it aside, doctor says
/// so (docs/security.md, "What an agent can plant").
pub fn planted_commondir(root: &Path) -> Option<PathBuf> {
    let git = root.join(".git");
    let p = git.join("commondir");
    (std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir())
        && std::fs::symlink_metadata(&p).is_ok())
    .then_some(p)
}
