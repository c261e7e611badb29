//! The user lab (issue 42, point 11): the README's quick start and each
//! example of `examples/swarm/`, run the way a person runs them. A real
//! account (`swarm-user` when the tests run as root, its home of mode 750;
//! see support/userland.rs), the project in `~/code/<name>` inside that
//! HOME, the binaries installed into a folder of that user's (as `cargo
//! install` leaves them), bubblewrap from the distribution on PATH (or, on
//! a machine without one, Debian's own copy named in `SWARM_BWRAP`), agents
//! confined (the default), in tmux and headless. Every command is pasted
//! into that user's `bash` as a person types it; no file of the checkout is
//! reachable to them (it may sit in a home only its owner can enter).
//!
//! The other tests keep their projects in temp folders or beside a HOME;
//! these keep them where users keep them, which is where a sandbox's
//! private home once hid every project (`bwrap: Can't chdir`).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{
    account, distro_bwrap, handoff_names, hq, require_tool, Account, Run, SwarmGuard,
};

/// A whole example run, start-up included.
const RUN: Duration = Duration::from_secs(120);

/// One person at their machine with one project in `~/code`. Fields drop
/// in order: the guard's `swarm down` runs while the project exists.
struct Lab {
    guard: SwarmGuard,
    project: tempfile::TempDir,
    acct: Account,
    /// The user's own installed binaries (first on PATH).
    bin: PathBuf,
    /// Where the user keeps programs besides the system's (the agent CLIs).
    path_first: Vec<PathBuf>,
    /// `SWARM_BWRAP` when the machine has no system bubblewrap.
    bwrap: Option<PathBuf>,
}

impl Lab {
    /// An empty `~/code/<name>-XXXXXX` of the account's, or None after a
    /// NOTE (a failure in CI).
    #[track_caller]
    fn new(name: &str) -> Option<Lab> {
        let acct = account()?;
        let bwrap = distro_bwrap(&acct)?;
        let bin = acct.installed();
        let code = acct.home.join("code");
        acct.make_dir(&code);
        let project = tempfile::Builder::new()
            .prefix(&format!("{name}-"))
            .tempdir_in(&code)
            .unwrap();
        acct.give(project.path());
        let lab = Lab {
            guard: SwarmGuard::new(project.path()),
            project,
            acct,
            bin,
            path_first: Vec::new(),
            bwrap,
        };
        lab.git_identity();
        Some(lab)
    }

    fn root(&self) -> &Path {
        self.project.path()
    }

    /// A person's git knows who they are (`git config --global`), once:
    /// under a lock, as each test may be a process of its own (nextest)
    /// and two first-time writers would collide on git's config lock.
    fn git_identity(&self) {
        static ONCE: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
        let mut done = ONCE.lock().unwrap_or_else(|e| e.into_inner());
        if !*done {
            let r = self.sh(
                "flock \"$HOME/.gitconfig.swarm-tests-lock\" sh -c \"git config --global user.email >/dev/null || { git config --global user.name 'Swarm User' && git config --global user.email swarm-user@example.com; }\"",
                Duration::from_secs(20),
            );
            assert_eq!(r.code, 0, "{r:?}");
            *done = true;
        }
    }

    /// The user's PATH: their own programs, then the machine's.
    fn path(&self) -> std::ffi::OsString {
        let mut dirs = vec![self.bin.clone()];
        dirs.extend(self.path_first.iter().cloned());
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        std::env::join_paths(dirs).unwrap()
    }

    /// `bash -euc <script>` as the user, in the project, with a person's
    /// environment (HOME, USER, PATH; no test variables).
    fn command(&self, script: &str) -> Command {
        let w = self.acct.wrapper();
        let mut c = match w.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg("bash");
                c
            }
            None => Command::new("bash"),
        };
        c.args(["-euc", script])
            .current_dir(self.root())
            .env_clear()
            .env("HOME", &self.acct.home)
            .env("USER", &self.acct.name)
            .env("LOGNAME", &self.acct.name)
            .env("SHELL", "/bin/bash")
            .env("LANG", "C.UTF-8")
            .env("PATH", self.path());
        if let Some(b) = &self.bwrap {
            c.env("SWARM_BWRAP", b);
        }
        c
    }

    /// Runs `script` to its end; after `timeout` it is killed and the test
    /// fails.
    fn sh(&self, script: &str, timeout: Duration) -> Run {
        let mut child = self
            .command(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash runs");
        let drain = |mut r: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                let _ = r.read_to_end(&mut v);
                v
            })
        };
        let out = drain(Box::new(child.stdout.take().unwrap()));
        let err = drain(Box::new(child.stderr.take().unwrap()));
        let end = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "timed out after {timeout:?} running as {}: {script}\n{}",
                    self.acct.name,
                    self.agent_logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        std::process::Output {
            status,
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        }
        .into()
    }

    /// `script` exits 0 within [`RUN`]; its output.
    #[track_caller]
    fn ok(&self, script: &str) -> Run {
        let r = self.sh(script, RUN);
        assert_eq!(
            r.code,
            0,
            "as {}: {script}\nstdout:\n{}\nstderr:\n{}\n{}",
            self.acct.name,
            r.stdout,
            r.stderr,
            self.agent_logs()
        );
        r
    }

    /// After `swarm up --detach` in tmux: its socket, for the guard.
    fn guard_tmux(&mut self) {
        let f = self.root().join(".swarmforge/tmux-socket");
        if let Ok(s) = fs::read_to_string(f) {
            self.guard.socket = Some(PathBuf::from(s.trim()));
        }
    }

    /// Waits for `cond` (the project's files, read as root), showing the
    /// agents' logs and panes on a timeout.
    fn wait(&self, what: &str, mut cond: impl FnMut() -> bool) {
        let end = Instant::now() + RUN;
        let mut pause = Duration::from_millis(20);
        while Instant::now() < end {
            if cond() {
                return;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(250));
        }
        assert!(
            cond(),
            "timed out after {RUN:?} waiting for: {what}\n{}\n--- panes:\n{}",
            self.agent_logs(),
            self.panes()
        );
    }

    /// Everything an agent said at start: the headless logs, handoffd.log.
    fn agent_logs(&self) -> String {
        let mut out = String::new();
        let dir = self.root().join(".swarmforge/agents");
        for e in fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.path().extension().is_some_and(|x| x == "log") {
                let t = fs::read_to_string(e.path()).unwrap_or_default();
                let tail: String = t.chars().take(3000).collect();
                out.push_str(&format!("== {}\n{tail}\n", e.path().display()));
            }
        }
        let log = fs::read_to_string(self.root().join(".swarmforge/daemon/handoffd.log"))
            .unwrap_or_default();
        out.push_str(&format!("== handoffd.log\n{log}"));
        out
    }

    fn panes(&self) -> String {
        let Some(sock) = &self.guard.socket else {
            return String::new();
        };
        let tmux = |args: &[&str]| {
            Command::new("tmux")
                .arg("-S")
                .arg(sock)
                .args(args)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        tmux(&["list-sessions", "-F", "#{session_name}"])
            .lines()
            .map(|s| format!("== {s}\n{}", tmux(&["capture-pane", "-p", "-t", s])))
            .collect()
    }

    /// The items `role` finished (its worktree `.worktrees/<role>`; a batch
    /// role's are in one folder per batch).
    fn completed(&self, role: &str) -> usize {
        let done = hq(
            &self.root().join(".worktrees").join(role),
            "inbox/completed",
        );
        let batches: usize = fs::read_dir(&done)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| handoff_names(&e.path()).len())
            .sum();
        handoff_names(&done).len() + batches
    }

    /// The transcript's lines, as the user reads it.
    fn transcript(&self) -> String {
        self.ok("swarm transcript").stdout
    }

    /// `swarm audit --check` is clean, as the user runs it.
    fn audited(&self) {
        let a = self.ok("swarm audit --check");
        assert!(a.stdout.starts_with("CHECK OK: "), "{}", a.stdout);
    }

    /// Every agent ran in its sandbox (its private home was made; a tmux
    /// pane's start script builds the sandbox), none died at its start, and
    /// what the swarm wrote in the project is the user's.
    fn confined_and_owned(&self, roles: &[&str]) {
        for role in roles {
            let home = self.root().join(format!(".swarmforge/agents/{role}/home"));
            assert!(
                home.is_dir(),
                "{role} ran unconfined: no {}",
                home.display()
            );
            let run = self.root().join(format!(".swarmforge/run/{role}.sh"));
            if let Ok(script) = fs::read_to_string(&run) {
                assert!(
                    script.contains("sandbox") || script.contains("bwrap"),
                    "{role} ran unconfined:\n{script}"
                );
            }
        }
        let logs = self.agent_logs();
        assert!(
            !logs.contains("bwrap: "),
            "an agent's sandbox failed:\n{logs}"
        );
        if let Some((uid, _)) = self.acct.ids {
            use std::os::unix::fs::MetadataExt;
            for rel in [".swarmforge/daemon/handoffd.log", ".swarmforge/roles.tsv"] {
                let f = self.root().join(rel);
                let m = fs::metadata(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                assert_eq!(m.uid(), uid, "{} is not the user's", f.display());
            }
        }
    }
}

/// The README's first command after the install (`swarm demo`), then its
/// quick start in a new project in `~/code`, headless:
/// `git init && git commit --allow-empty -m init && swarm init --example
/// pipeline && swarm up --no-tmux --until-idle`. The coder's three commits
/// reach the cleaner and come back tidied, every agent confined. Failed
/// before the sandbox gave back a project inside HOME: every agent died at
/// start (`bwrap: Can't chdir to ~/code/proj/.worktrees/coder`).
#[test]
fn the_readme_quick_start_runs_headless_in_a_project_in_the_users_home() {
    let Some(lab) = Lab::new("proj") else {
        return;
    };
    let demo = lab.ok("cd ~ && swarm demo");
    assert!(
        demo.stdout.contains("cleaner") && demo.stdout.contains("coder"),
        "{}",
        demo.stdout
    );
    let up = lab.ok("git init -q && git commit -q --allow-empty -m init
         swarm init --example pipeline
         swarm up --no-tmux --until-idle --timeout 90s");
    let t = lab.transcript();
    assert!(
        t.contains("[coder -> cleaner] git_handoff")
            && t.contains("[cleaner -> coder] git_handoff"),
        "{t}\n{}\n{}",
        up.stderr,
        lab.agent_logs()
    );
    let log = lab.ok("git log --oneline swarmforge-coder").stdout;
    assert!(log.contains("cleaner: tidy"), "{log}");
    lab.confined_and_owned(&["coder", "cleaner"]);
    lab.audited();
}

/// The same quick start in tmux, as `swarm up` runs it by default
/// (`--detach`: a test has no terminal to attach to): the tidied commits
/// come back to the coder, then `swarm down` as the user stops it all.
#[test]
fn the_readme_quick_start_runs_in_tmux_in_a_project_in_the_users_home() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(mut lab) = Lab::new("proj") else {
        return;
    };
    let up = lab.sh(
        "git init -q && git commit -q --allow-empty -m init
         swarm init --example pipeline
         swarm up --detach",
        RUN,
    );
    lab.guard_tmux();
    assert_eq!(up.code, 0, "{}\n{}", up.stdout, up.stderr);
    lab.wait("the coder merged the cleaner's tidied commit", || {
        lab.completed("coder") >= 1 && lab.completed("cleaner") >= 1
    });
    let t = lab.transcript();
    assert!(t.contains("[cleaner -> coder] git_handoff"), "{t}");
    lab.confined_and_owned(&["coder", "cleaner"]);
    lab.ok("swarm down");
    lab.audited();
}

/// `examples/swarm/roundtable` as a person starts it in `~/code`, headless
/// to the end: three questions asked and answered, the architect's clarify
/// answered by the (scripted) owner, the discussion closed.
#[test]
fn the_roundtable_example_runs_headless_in_the_users_home() {
    let Some(lab) = Lab::new("roundtable") else {
        return;
    };
    lab.ok("git init -q && git commit -q --allow-empty -m init
         swarm init --example roundtable
         swarm up --no-tmux --until-idle --timeout 90s");
    let t = lab.transcript();
    assert!(
        t.contains("[architect -> owner] clarify") && t.contains("[coordinator -> all] close"),
        "{t}"
    );
    lab.confined_and_owned(&["coordinator", "architect", "tester", "writer", "owner"]);
    lab.audited();
}

/// `examples/swarm/forum` as a person starts it in `~/code`, in tmux: the
/// speakers post and the moderator digests the first three contributions;
/// `swarm down` as the user stops it.
#[test]
fn the_forum_example_starts_in_tmux_in_the_users_home() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(mut lab) = Lab::new("forum") else {
        return;
    };
    let up = lab.sh(
        "git init -q && git commit -q --allow-empty -m init
         swarm init --example forum
         swarm up --detach",
        RUN,
    );
    lab.guard_tmux();
    assert_eq!(up.code, 0, "{}\n{}", up.stdout, up.stderr);
    lab.wait("the moderator digested the first contributions", || {
        lab.completed("moderator") >= 1 && lab.transcript().contains("[moderator -> all] digest")
    });
    lab.confined_and_owned(&["ada", "ben", "cy", "moderator"]);
    lab.ok("swarm down");
}

/// README: `swarm init --example trio` starts a project with Claude Code,
/// Codex and Gemini CLI. Here the user installed the three with `npm
/// install -g` into their own prefix (`~/.npm-global`, inside HOME, as
/// `.ci/run` does for swarm-user), pointed each at a scripted model on
/// 127.0.0.1 in its worktree's own settings (Codex through the role's
/// `args:`), and ran `swarm up --detach --trust` in tmux, confined,
/// answering Claude Code's first start in the architect's pane if their
/// HOME never ran it (`swarm attach --choose`, support/first_run.rs). The
/// owner's request flows owner -> architect (Claude Code) -> coder (Codex)
/// -> owner, and the reviewer (Gemini CLI) takes and finishes a note.
#[test]
fn the_trio_example_runs_in_tmux_with_the_users_own_agent_clis() {
    use crate::real_agents::{claude_write, codex_args, draft};
    use crate::support::{ModelServer, Step};
    use serde_json::json;
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(mut lab) = Lab::new("trio") else {
        return;
    };
    let Some(clis) = lab.acct.agent_clis() else {
        return;
    };
    lab.path_first.push(clis);
    lab.ok("git init -q && git commit -q --allow-empty -m init && swarm init -q --example trio");
    let model = ModelServer::start();
    let root = lab.root().to_path_buf();
    let wt = |role: &str| root.join(".worktrees").join(role);
    // What the person configures: Codex's provider in swarm.yaml...
    let yaml_path = root.join("swarm.yaml");
    let yaml = fs::read_to_string(&yaml_path).unwrap().replacen(
        "    agent: codex\n",
        &format!(
            "    agent: codex\n    args: {}\n",
            codex_args("coder").replace("@MODEL@", &format!("http://127.0.0.1:{}", model.port))
        ),
        1,
    );
    fs::write(&yaml_path, yaml).unwrap();
    // ... Claude Code's endpoint in the architect's worktree ...
    let write = |f: PathBuf, text: String| {
        lab.acct.make_dir(f.parent().unwrap());
        fs::write(&f, text).unwrap();
        lab.acct.give(&f);
    };
    write(
        wt("architect").join(".claude/settings.json"),
        json!({"env": {
            "ANTHROPIC_BASE_URL": model.url("architect"),
            "ANTHROPIC_AUTH_TOKEN": "dummy-token-for-the-scripted-model",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }})
        .to_string(),
    );
    // ... Gemini CLI's in the reviewer's ...
    write(
        wt("reviewer").join(".gemini/.env"),
        format!(
            "GEMINI_API_KEY=dummy-key-for-the-scripted-model\nGOOGLE_GEMINI_BASE_URL={}\n",
            model.url("reviewer")
        ),
    );
    write(
        wt("reviewer").join(".gemini/settings.json"),
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "general": {"disableAutoUpdate": true, "disableUpdateNag": true}})
        .to_string(),
    );

    model.script(
        "architect",
        vec![
            Step::shell("ready_for_next.sh"),
            claude_write(
                &wt("architect"),
                "task.txt",
                &draft("coder", "write hello.sh"),
            ),
            Step::shell("swarm_handoff.sh task.txt"),
            Step::shell("done_with_current.sh"),
            Step::text("Sent the task to coder."),
        ],
    );
    model.script(
        "coder",
        vec![
            // Held until the architect's task waits in its inbox.
            Step::shell("ready_for_next.sh").after("coder-mail"),
            Step::shell(&format!(
                "printf '{}' > answer.txt && swarm_handoff.sh answer.txt",
                draft("owner", "hello.sh is written").replace('\n', "\\n")
            )),
            Step::shell("done_with_current.sh"),
            Step::text("Done."),
        ],
    );
    model.script(
        "reviewer",
        vec![
            Step::shell("ready_for_next.sh"),
            Step::shell("done_with_current.sh"),
            Step::text("Reviewed."),
        ],
    );
    lab.ok(&format!(
        "printf '{}' > ask.txt && SWARMFORGE_ROLE=owner swarm-handoff ask.txt
         printf '{}' > note.txt && SWARMFORGE_ROLE=owner swarm-handoff note.txt",
        draft("architect", "please add a hello script").replace('\n', "\\n"),
        draft("reviewer", "please look at the last commit").replace('\n', "\\n"),
    ));
    // The gateway token in their environment, as a person using one
    // exports it (Claude Code's first start reads its login there).
    let up = lab.sh(
        "ANTHROPIC_AUTH_TOKEN=dummy-token-for-the-scripted-model swarm up --detach --trust",
        RUN,
    );
    lab.guard_tmux();
    assert_eq!(up.code, 0, "{}\n{}", up.stdout, up.stderr);
    // Claude Code's first start, if their HOME never ran it: they answer
    // its pages in the architect's pane.
    let agents = root.join(".swarmforge/agents");
    crate::support::answer_first_start(
        &|args| lab.sh(&format!("swarm {}", args.join(" ")), RUN),
        &["architect".to_string()],
        &|role| {
            crate::support::onboarded(&agents.join(role).join("home/.claude.json"))
                || crate::support::onboarded(&lab.acct.home.join(".claude.json"))
        },
        RUN,
    );
    let coder_new = hq(&wt("coder"), "inbox/new");
    lab.wait("the architect's task reaches the coder", || {
        model.reached("architect", 4) && !handoff_names(&coder_new).is_empty()
    });
    model.open("coder-mail");
    let owner_new = hq(&root.join(".swarmforge/people/owner"), "inbox/new");
    lab.wait("the coder's answer reaches the owner", || {
        handoff_names(&owner_new).len() == 1
            && lab.completed("coder") == 1
            && lab.completed("architect") == 1
            && lab.completed("reviewer") == 1
    });
    let t = lab.transcript();
    for m in [
        "[owner -> architect] note please add a hello script",
        "[architect -> coder] note write hello.sh",
        "[coder -> owner] note hello.sh is written",
        "[owner -> reviewer] note please look at the last commit",
    ] {
        assert!(
            t.contains(m),
            "transcript lacks {m:?}:\n{t}\n{}",
            model.dump()
        );
    }
    lab.confined_and_owned(&["architect", "coder", "reviewer"]);
    lab.ok("swarm down");
    lab.audited();
}
