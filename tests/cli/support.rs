//! Test fixtures: temp projects, the real binaries, deadlines (never fixed sleeps).

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin(name: &str) -> PathBuf {
    match name {
        "swarm-handoff" => PathBuf::from(env!("CARGO_BIN_EXE_swarm-handoff")),
        "ready-next" => PathBuf::from(env!("CARGO_BIN_EXE_ready-next")),
        "done-current" => PathBuf::from(env!("CARGO_BIN_EXE_done-current")),
        "handoffd" => PathBuf::from(env!("CARGO_BIN_EXE_handoffd")),
        "swarm" => PathBuf::from(env!("CARGO_BIN_EXE_swarm")),
        other => panic!("unknown binary {other}"),
    }
}

/// The directory holding the binaries (for PATH in scripted agents).
pub fn bin_dir() -> PathBuf {
    bin("swarm").parent().unwrap().to_path_buf()
}

/// Waits for `cond` until `timeout`; panics with `what` on timeout.
pub fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    while Instant::now() < end {
        if cond() {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    assert!(cond(), "timed out after {timeout:?} waiting for: {what}");
}

pub const DEADLINE: Duration = Duration::from_secs(20);

/// A finished command's facts.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    pub fn ok(&self) -> &Self {
        assert_eq!(
            self.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// A temp project: a git repository with `.swarmforge/roles.tsv`.
pub struct Project {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
}

/// A command with the environment SwarmForge's tests use: PATH,
/// GIT_CONFIG_NOSYSTEM and (optionally) SWARMFORGE_ROLE; no HOME.
pub fn clean_command(program: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(program);
    c.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com");
    c
}

pub fn git(cwd: &Path, args: &[&str]) -> String {
    let out = clean_command(Path::new("git"), cwd)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Project {
    /// A git repository with one commit and the given roles, all in the main
    /// worktree: `(name, mode)`.
    pub fn new(roles: &[(&str, &str)]) -> Project {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().unwrap();
        git(&root, &["init", "-q", "-b", "master"]);
        fs::write(root.join("README"), "x\n").unwrap();
        git(&root, &["add", "README"]);
        git(&root, &["commit", "-q", "-m", "init"]);
        let p = Project { dir, root };
        p.write_roles(roles);
        p
    }

    /// Rewrites roles.tsv with every role in the main worktree.
    pub fn write_roles(&self, roles: &[(&str, &str)]) {
        let mut s = String::new();
        for (name, mode) in roles {
            s.push_str(&format!(
                "{name}\tmaster\t{}\tswarmforge-{name}\t{name}\tcodex\t{mode}\n",
                self.root.display()
            ));
        }
        self.write_roles_raw(&s);
    }

    pub fn write_roles_raw(&self, text: &str) {
        fs::create_dir_all(self.root.join(".swarmforge")).unwrap();
        fs::write(self.root.join(".swarmforge/roles.tsv"), text).unwrap();
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// `<root>/.swarmforge/handoffs/<rel>`
    pub fn handoffs(&self, rel: &str) -> PathBuf {
        self.root.join(".swarmforge/handoffs").join(rel)
    }

    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, content).unwrap();
        p
    }

    /// A new commit; returns its full hash.
    pub fn commit(&self, msg: &str) -> String {
        fs::write(self.root.join("change.txt"), msg).unwrap();
        git(&self.root, &["add", "change.txt"]);
        git(&self.root, &["commit", "-q", "-m", msg]);
        git(&self.root, &["rev-parse", "HEAD"])
    }

    /// Runs a binary in `cwd` (relative to the root) as `role` (None: unset).
    pub fn run_in(&self, cwd: &str, role: Option<&str>, program: &str, args: &[&str]) -> Run {
        let mut c = clean_command(&bin(program), &self.root.join(cwd));
        if let Some(r) = role {
            c.env("SWARMFORGE_ROLE", r);
        }
        c.args(args)
            .stdin(Stdio::null())
            .output()
            .expect("binary runs")
            .into()
    }

    pub fn run(&self, role: Option<&str>, program: &str, args: &[&str]) -> Run {
        self.run_in("", role, program, args)
    }

    /// Writes `draft.txt` and sends it as `role`.
    pub fn send(&self, role: &str, draft: &str) -> Run {
        self.write("draft.txt", draft);
        self.run(Some(role), "swarm-handoff", &["draft.txt"])
    }

    /// Files (not dirs) directly in a folder, sorted by name.
    pub fn files(&self, dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = match fs::read_dir(dir) {
            Ok(rd) => rd
                .flatten()
                .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        v.sort();
        v
    }

    /// Delivers every outbox file once with `handoffd --once`.
    pub fn deliver_once(&self) -> Run {
        let r: Run = clean_command(&bin("handoffd"), &self.root)
            .arg("--once")
            .arg(&self.root)
            .output()
            .expect("handoffd runs")
            .into();
        r
    }

    /// Starts `handoffd [extra] <root>` (stderr into `<root>/handoffd.stderr`)
    /// and waits until this very process holds the pid file and has logged
    /// one more `started` line, so it also waits correctly for a restart.
    /// Killed when the guard drops.
    pub fn spawn_daemon(&self, extra: &[&str]) -> Daemon {
        let before = log_count(&self.log(), "started");
        let err_path = self.root.join("handoffd.stderr");
        let err = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&err_path)
            .unwrap();
        let child = clean_command(&bin("handoffd"), &self.root)
            .args(extra)
            .arg(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("handoffd starts");
        let pid = child.id();
        let mut d = Daemon { child: Some(child) };
        let pid_file = self.root.join(".swarmforge/daemon/handoffd.pid");
        let end = Instant::now() + DEADLINE;
        loop {
            let mine = fs::read_to_string(&pid_file).is_ok_and(|s| s.trim() == pid.to_string());
            if mine && log_count(&self.log(), "started") > before {
                return d;
            }
            if let Some(Some(code)) = d.child.as_mut().map(|c| c.try_wait().ok().flatten()) {
                panic!(
                    "handoffd exited with {code:?} while starting; stderr:\n{}",
                    fs::read_to_string(&err_path).unwrap_or_default()
                );
            }
            assert!(Instant::now() < end, "handoffd did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.root.join(".swarmforge/daemon/handoffd.log")).unwrap_or_default()
    }
}

/// A running daemon, killed on drop.
pub struct Daemon {
    pub child: Option<Child>,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits for the process to exit; returns its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let end = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                self.child = None;
                return st.code();
            }
            if Instant::now() > end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A role row for [`Project::write_role_rows`]: (name, worktree name, agent,
/// receive mode). A worktree other than `master` lives in `.worktrees/<name>`.
pub type RoleRow<'a> = (&'a str, &'a str, &'a str, &'a str);

impl Project {
    /// The folder of worktree `wt` (`master` is the root).
    pub fn wt_path(&self, wt: &str) -> PathBuf {
        if wt == "master" {
            self.root.clone()
        } else {
            self.root.join(".worktrees").join(wt)
        }
    }

    /// `<worktree>/.swarmforge/handoffs/<rel>`
    pub fn hq(&self, wt: &str, rel: &str) -> PathBuf {
        self.wt_path(wt).join(".swarmforge/handoffs").join(rel)
    }

    /// Rewrites roles.tsv from rows; each role worktree gets its state folder
    /// and a `project-root` pointer, as `swarm init` makes them.
    pub fn write_role_rows(&self, rows: &[RoleRow]) {
        let mut tsv = String::new();
        for (name, wt, agent, mode) in rows {
            let path = self.wt_path(wt);
            if *wt != "master" {
                fs::create_dir_all(path.join(".swarmforge/handoffs")).unwrap();
                fs::write(
                    path.join(".swarmforge/project-root"),
                    format!("{}\n", self.root.display()),
                )
                .unwrap();
            }
            tsv.push_str(&format!(
                "{name}\t{wt}\t{}\tswarmforge-{name}\t{name}\t{agent}\t{mode}\n",
                path.display()
            ));
        }
        self.write_roles_raw(&tsv);
    }
}

/// handoffd.log lines (without the time stamp) whose event word is `word`.
pub fn log_lines(log: &str, word: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.split(' ').nth(1) == Some(word))
        .map(|l| l.split_once(' ').unwrap().1.to_string())
        .collect()
}

pub fn log_count(log: &str, word: &str) -> usize {
    log_lines(log, word).len()
}
