//! Running the real binaries: `p.cmd("ready-next").role("qa").arg("--task")`,
//! with expectations on exit code and output checked by `run()` (as `just`'s
//! test builder does), and the facts of a finished run.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{bin, bin_dir, clean_command, Project};

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
    #[track_caller]
    pub fn ok(&self) -> &Self {
        assert_eq!(
            self.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Asserts exit code, stdout and stderr exactly, all at once.
    pub fn is(&self, code: i32, stdout: &str, stderr: &str) -> &Self {
        assert_eq!(
            (self.code, self.stdout.as_str(), self.stderr.as_str()),
            (code, stdout, stderr)
        );
        self
    }

    /// Asserts stdout contains `text`, showing stdout when it does not.
    #[track_caller]
    pub fn stdout_has(&self, text: &str) -> &Self {
        assert!(
            self.stdout.contains(text),
            "stdout lacks {text:?}:\n{}",
            self.stdout
        );
        self
    }

    /// Asserts stderr contains `text`, showing stderr when it does not.
    #[track_caller]
    pub fn stderr_has(&self, text: &str) -> &Self {
        assert!(
            self.stderr.contains(text),
            "stderr lacks {text:?}:\n{}",
            self.stderr
        );
        self
    }

    /// The path of the `HANDOFF QUEUED: <path>` line (asserts exit 0).
    pub fn queued(&self) -> PathBuf {
        self.ok();
        PathBuf::from(
            self.stdout
                .lines()
                .find_map(|l| l.strip_prefix("HANDOFF QUEUED: "))
                .unwrap_or_else(|| panic!("no HANDOFF QUEUED line: {self:?}")),
        )
    }

    /// stdout as one JSON value.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

/// One command to run in a project; see [`Project::cmd`].
#[must_use]
pub struct Cmd<'p> {
    project: &'p Project,
    program: PathBuf,
    under: Vec<OsString>,
    role: Option<String>,
    dir: Option<PathBuf>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    stdin: Option<Vec<u8>>,
    code: Option<i32>,
    stdout: Option<String>,
    stderr: Option<String>,
    stdout_has: Vec<String>,
    stderr_has: Vec<String>,
}

impl Project {
    /// One of the real binaries (`swarm`, `swarm-handoff`, `ready-next`,
    /// `done-current`, `handoffd`) or any program on PATH, run at the root
    /// with a clean environment; see [`Cmd`].
    pub fn cmd(&self, program: &str) -> Cmd<'_> {
        let program = match program {
            "swarm" | "swarm-handoff" | "ready-next" | "done-current" | "handoffd" => bin(program),
            other => PathBuf::from(other),
        };
        Cmd {
            project: self,
            program,
            under: Vec::new(),
            role: None,
            dir: None,
            args: Vec::new(),
            env: Vec::new(),
            stdin: None,
            code: None,
            stdout: None,
            stderr: None,
            stdout_has: Vec::new(),
            stderr_has: Vec::new(),
        }
    }
}

impl Cmd<'_> {
    /// Runs as `role` (SWARMFORGE_ROLE) from its worktree, unless [`Cmd::at`]
    /// names another folder.
    pub fn role(mut self, role: &str) -> Self {
        self.role = Some(role.to_string());
        self
    }

    /// The working directory: relative to the root, or absolute.
    pub fn at(mut self, dir: impl AsRef<Path>) -> Self {
        self.dir = Some(self.project.root.join(dir));
        self
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<A: Into<OsString>>(mut self, args: impl IntoIterator<Item = A>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The binaries first on PATH, as a scripted agent needs them.
    pub fn bins_on_path(self) -> Self {
        let path = format!(
            "{}:{}",
            bin_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        self.env("PATH", path)
    }

    /// Runs the program under a wrapper: `under(&["faketime", "2099-01-01"])`
    /// runs `faketime 2099-01-01 <program> <args>`.
    pub fn under(mut self, wrapper: &[&str]) -> Self {
        self.under = wrapper.iter().map(OsString::from).collect();
        self
    }

    /// Bytes on stdin (otherwise stdin is empty).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Expects this exit code.
    pub fn code(mut self, code: i32) -> Self {
        self.code = Some(code);
        self
    }

    /// Expects exactly this stdout.
    pub fn stdout(mut self, text: &str) -> Self {
        self.stdout = Some(text.to_string());
        self
    }

    /// Expects exactly this stderr.
    pub fn stderr(mut self, text: &str) -> Self {
        self.stderr = Some(text.to_string());
        self
    }

    /// Expects stdout to contain `text`.
    pub fn stdout_has(mut self, text: &str) -> Self {
        self.stdout_has.push(text.to_string());
        self
    }

    /// Expects stderr to contain `text`.
    pub fn stderr_has(mut self, text: &str) -> Self {
        self.stderr_has.push(text.to_string());
        self
    }

    /// The command as std would run it (stdio not set).
    pub fn command(&self) -> Command {
        let dir = match (&self.dir, &self.role) {
            (Some(d), _) => d.clone(),
            (None, Some(r)) => self.project.role_dir(r),
            (None, None) => self.project.root.clone(),
        };
        let mut c = match self.under.split_first() {
            Some((wrapper, rest)) => {
                let mut c = clean_command(Path::new(wrapper), &dir);
                c.args(rest).arg(&self.program);
                c
            }
            None => clean_command(&self.program, &dir),
        };
        if let Some(r) = &self.role {
            c.env("SWARMFORGE_ROLE", r);
        }
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c.args(&self.args);
        c
    }

    /// Starts it with stdio to /dev/null.
    pub fn spawn(&self) -> Child {
        self.command()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} starts: {e}", self.program.display()))
    }

    /// Runs it to the end and checks every expectation, showing the whole
    /// output when one fails.
    pub fn run(self) -> Run {
        let mut c = self.command();
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let out = match &self.stdin {
            None => c.stdin(Stdio::null()).output(),
            Some(bytes) => c.stdin(Stdio::piped()).spawn().and_then(|mut child| {
                // A program may exit without reading; a broken pipe is its answer.
                let _ = child.stdin.take().unwrap().write_all(bytes);
                child.wait_with_output()
            }),
        };
        let r: Run = out
            .unwrap_or_else(|e| panic!("{} runs: {e}", self.program.display()))
            .into();
        self.check(r)
    }

    /// Runs it to the end like [`Cmd::run`], but fails (and kills it) if it
    /// has not exited within `timeout`: for what must never block.
    pub fn run_within(self, timeout: Duration) -> Run {
        let what = format!("{} {:?} exits", self.program.display(), self.args);
        let r = self.start().finish(timeout, &what);
        self.check(r)
    }

    /// Starts it (stdin empty), collecting its output meanwhile.
    pub fn start(&self) -> Started {
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{} starts: {e}", self.program.display()));
        // Drained meanwhile, so a chatty child never blocks on a full pipe.
        fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                let _ = r.read_to_end(&mut v);
                v
            })
        }
        let out = drain(child.stdout.take().unwrap());
        let err = drain(child.stderr.take().unwrap());
        Started {
            child,
            out: Some(out),
            err: Some(err),
        }
    }

    fn check(&self, r: Run) -> Run {
        let what = format!("{} {:?}", self.program.display(), self.args);
        let mut wrong = Vec::new();
        if let Some(code) = self.code {
            if r.code != code {
                wrong.push(format!("exit code {} (want {code})", r.code));
            }
        }
        if let Some(want) = &self.stdout {
            if r.stdout != *want {
                wrong.push(format!("stdout (want {want:?})"));
            }
        }
        if let Some(want) = &self.stderr {
            if r.stderr != *want {
                wrong.push(format!("stderr (want {want:?})"));
            }
        }
        for want in &self.stdout_has {
            if !r.stdout.contains(want.as_str()) {
                wrong.push(format!("stdout lacks {want:?}"));
            }
        }
        for want in &self.stderr_has {
            if !r.stderr.contains(want.as_str()) {
                wrong.push(format!("stderr lacks {want:?}"));
            }
        }
        assert!(
            wrong.is_empty(),
            "{what}: wrong {}\nexit code: {}\nstdout:\n{}\nstderr:\n{}",
            wrong.join(", "),
            r.code,
            r.stdout,
            r.stderr
        );
        r
    }
}

/// A started command whose stdout and stderr are collected as it runs.
pub struct Started {
    pub child: Child,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<Vec<u8>>>,
}

impl Started {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its facts once it has exited; after `timeout` it is killed and the
    /// test fails, naming `what` it waited for.
    pub fn finish(mut self, timeout: Duration, what: &str) -> Run {
        let end = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("timed out after {timeout:?} waiting for: {what}");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        Output {
            status,
            stdout: self.out.take().unwrap().join().unwrap(),
            stderr: self.err.take().unwrap().join().unwrap(),
        }
        .into()
    }
}
