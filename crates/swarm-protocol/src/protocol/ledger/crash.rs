//! The ledger's crash harness, for its own test and for each store on it
//! (built for tests, and with the `crash-test` feature for the crates
//! above): a child process (the test binary again, running one named test)
//! carries requests through a store, stops after each durable step
//! ([`super::step`]) for the parent's go, and is SIGKILLed after the first
//! step, then (in a copy of what it left) after the second, and so on; a
//! restart, itself killed after each of its own steps in turn, and then a
//! third run carry it on. The store's own check says what every run must
//! end with.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Set in the child: the folder it works in.
const CHILD: &str = "SWARM_LEDGER_CRASH_CHILD";
/// What starts a step's line on the child's stdout.
const MARK: &str = "ledger-step: ";
/// Longest a child may take for one step (a hung child fails the test).
const STEP_DEADLINE: Duration = Duration::from_secs(120);

static STEP: OnceLock<fn(&str)> = OnceLock::new();

pub(super) fn step(name: &str) {
    if let Some(f) = STEP.get() {
        f(name);
    }
}

/// In the child: the folder to work in, every step from now on stopping
/// for the parent's go. None in any other run of the test.
pub fn child() -> Option<PathBuf> {
    let root = std::env::var_os(CHILD)?;
    let _ = STEP.set(pause);
    Some(PathBuf::from(root))
}

/// Prints the step and waits for the parent's go (or its SIGKILL).
pub fn pause(name: &str) {
    let mut out = std::io::stdout();
    // On a line of its own: the harness's "test ... " has no line end.
    let _ = writeln!(out, "\n{MARK}{name}");
    let _ = out.flush();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// Runs the test `child_test` (its full path) as the child on `root`,
/// SIGKILLed after its `kill_at`th step (counted from 1); true when it was
/// killed, false when it finished.
pub fn run(child_test: &str, root: &Path, kill_at: Option<usize>) -> bool {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .env(CHILD, root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if line.starts_with(MARK) && tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut steps = 0;
    loop {
        match rx.recv_timeout(STEP_DEADLINE) {
            Ok(_) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                child.kill().unwrap();
                panic!("the child took no step for {STEP_DEADLINE:?}");
            }
        }
        steps += 1;
        if Some(steps) == kill_at {
            child.kill().unwrap();
            child.wait().unwrap();
            return true;
        }
        stdin.write_all(b"\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// Kills the child after its `first`th step, for each step in turn, then
/// the restart after each of its own steps in turn, then lets a third run
/// finish, and checks each outcome. Returns the kills.
pub fn kill_at_every_step(
    child_test: &str,
    setup: impl Fn(&Path),
    check: impl Fn(&Path, &str),
) -> usize {
    let mut kills = 0;
    for first in 1.. {
        let d = tempfile::tempdir().unwrap();
        setup(d.path());
        if !run(child_test, d.path(), Some(first)) {
            check(d.path(), "a run not killed");
            break;
        }
        kills += 1;
        // The restart, killed in turn after each of its own steps.
        for second in 1.. {
            let e = tempfile::tempdir().unwrap();
            copy_tree(d.path(), e.path());
            let killed = run(child_test, e.path(), Some(second));
            if killed {
                kills += 1;
                assert!(!run(child_test, e.path(), None));
            }
            check(
                e.path(),
                &format!("killed after steps {first} and {second}"),
            );
            if !killed {
                break;
            }
        }
    }
    kills
}

/// Copies a folder's files and folders (a killed child's state, to run
/// several restarts from it).
pub fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        let kind = e.file_type().unwrap();
        if kind.is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&e.path(), &target);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &target).unwrap();
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}
