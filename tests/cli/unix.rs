//! Issue 17, "a good Unix citizen": completions, man pages, one JSON
//! convention, terminal manners and bounded logs.

use std::fs;
use std::process::Command;

use crate::support::*;

/// Runs `shell -c script` and returns (success, stdout + stderr).
fn shell(shell: &str, script: &str) -> (bool, String) {
    let o = Command::new(shell).arg("-c").arg(script).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

#[test]
fn bash_loads_the_completions_of_every_binary() {
    let p = Project::empty();
    let script = p.cmd("swarm").args(["completions", "bash"]).run();
    script.ok();
    let file = p.write("swarm.bash", &script.stdout);
    let (ok, out) = shell(
        "bash",
        &format!("set -e; source '{}'; complete -p", file.display()),
    );
    assert!(ok, "{out}");
    for b in BINARIES {
        assert!(
            out.contains(&format!(" {b}\n")),
            "no completion for {b}:\n{out}"
        );
    }
    // Subcommands come from the clap definitions.
    assert!(script.stdout.contains("transcript"));
    assert!(script.stdout.contains("completions"));
}

#[test]
fn zsh_loads_the_completions_of_every_binary() {
    if !require_tool("zsh", "apt-get install -y zsh") {
        return;
    }
    let p = Project::empty();
    let all = p.cmd("swarm").args(["completions", "zsh"]).run();
    all.ok();
    let file = p.write("all.zsh", &all.stdout);
    let (ok, out) = shell(
        "zsh",
        &format!(
            "autoload -U compinit && compinit -u -d '{}' && source '{}' && \
             for b in {}; do print -r -- \"$b=$_comps[$b]\"; done",
            p.root.join("zcompdump").display(),
            file.display(),
            BINARIES.join(" ")
        ),
    );
    assert!(ok, "{out}");
    for b in BINARIES {
        let f = format!("_{b}");
        assert!(out.contains(&format!("{b}={f}\n")), "{b} not bound:\n{out}");
    }
    // --bin: one binary's script, the fpath form.
    let one = p
        .cmd("swarm")
        .args(["completions", "zsh", "--bin", "ready-next"])
        .run();
    one.ok();
    assert!(
        one.stdout.starts_with("#compdef ready-next"),
        "{}",
        one.stdout
    );
    assert!(!one.stdout.contains("_swarm()"));
    p.cmd("swarm")
        .args(["completions", "zsh", "--bin", "nope"])
        .code(1)
        .stderr_has("no binary named 'nope'")
        .run();
}

#[test]
fn fish_completions_parse_when_fish_is_there() {
    let p = Project::empty();
    let script = p.cmd("swarm").args(["completions", "fish"]).run();
    script.ok();
    assert!(script.stdout.contains("complete -c done-current"));
    // fish is not in CI's tool list: checked when present only.
    if Command::new("fish").arg("--version").output().is_ok() {
        let file = p.write("swarm.fish", &script.stdout);
        let (ok, out) = shell("fish", &format!("source '{}'", file.display()));
        assert!(ok, "{out}");
    }
}

/// Terminal text without overstrike (`N\bN` bold, `_\bx` underline).
fn plain(s: &str) -> String {
    let mut out: Vec<char> = Vec::new();
    for c in s.chars() {
        if c == '\u{8}' {
            out.pop();
        } else {
            out.push(c);
        }
    }
    out.into_iter().collect()
}

#[test]
fn man_pages_for_every_binary_and_subcommand_render() {
    if !require_tool("man", "apt-get install -y man-db") {
        return;
    }
    let p = Project::empty();
    let dir = p.root.join("man/man1");
    let r = p.cmd("swarm").arg("man").arg(&dir).run();
    r.ok();
    let names = files(&dir);
    for b in BINARIES {
        assert!(names.contains(&format!("{b}.1")), "{names:?}");
    }
    for sub in [
        "swarm-transcript.1",
        "swarm-events.1",
        "swarm-session-start.1",
        "swarm-man.1",
    ] {
        assert!(names.contains(&sub.to_string()), "{names:?}");
    }
    assert_eq!(r.stdout.lines().count(), names.len());
    for name in &names {
        let o = Command::new("man")
            .arg("-l")
            .arg(dir.join(name))
            .env("MANWIDTH", "80")
            .env("MAN_KEEP_FORMATTING", "0")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .output()
            .unwrap();
        let text = plain(&String::from_utf8_lossy(&o.stdout));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {err}");
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{name}:\n{text}"
        );
        assert!(!err.contains("warning"), "{name}: {err}");
    }
    let page = fs::read_to_string(dir.join("swarm-events.1")).unwrap();
    assert!(page.contains("with\\-offset"), "{page}");
}

// ---- bounded logs ----------------------------------------------------------

/// `swarm events ...` running, its stdout lines collected by a thread.
struct Follower {
    child: std::process::Child,
    out: std::sync::Arc<std::sync::Mutex<String>>,
    /// Its stderr (notices, an error it stopped on), for failure reports.
    err: std::path::PathBuf,
}

impl Follower {
    fn spawn(p: &Project, args: &[&str]) -> Follower {
        use std::io::BufRead;
        let err = p.path("follower.stderr");
        let mut child = p
            .cmd("swarm")
            .args(args)
            .command()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(fs::File::create(&err).unwrap())
            .spawn()
            .expect("swarm starts");
        let out = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = out.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Follower { child, out, err }
    }

    /// Whether it still runs, and what it said on stderr.
    fn state(&mut self) -> String {
        format!(
            "exit: {:?}; stderr: {:?}",
            self.child.try_wait(),
            fs::read_to_string(&self.err).unwrap_or_default()
        )
    }

    fn text(&self) -> String {
        self.out.lock().unwrap().clone()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const SMALL_LOGS: &str = "wake: {method: none}\nlogs: {max_bytes: 1024, keep: 100000}\n";

/// Roles `a` and `b` in the main worktree, logs rotated at 1 KiB, no wake-ups.
fn small_logs_project() -> Project {
    Project::builder()
        .role("a")
        .role("b")
        .config(SMALL_LOGS)
        .build()
}

/// `swarm events --follow --with-offset`, running.
fn follow_with_offsets(p: &Project) -> Follower {
    Follower::spawn(p, &["events", "--follow", "--with-offset"])
}

/// Posts notes `a` → `b` numbered `seqs` ("flood <n>").
fn flood(p: &Project, seqs: std::ops::Range<u32>) {
    for i in seqs {
        p.post("master", &note("a", i, "b", &format!("flood {i}")));
    }
}

fn events_path(p: &Project) -> std::path::PathBuf {
    p.path(".swarmforge/daemon/events.jsonl")
}

/// The rotated parts of a log: (start offset from the name, length).
fn parts(live: &std::path::Path) -> Vec<(u64, u64)> {
    let name = live.file_name().unwrap().to_string_lossy().into_owned();
    let mut v: Vec<(u64, u64)> = fs::read_dir(live.parent().unwrap())
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let start = n.strip_prefix(&format!("{name}."))?.parse().ok()?;
            Some((start, e.metadata().unwrap().len()))
        })
        .collect();
    v.sort();
    v
}

/// Every part starts where the one before ends; the live file where the
/// last one ends: no byte of the log is missing or counted twice.
fn assert_contiguous(live: &std::path::Path) {
    let ps = parts(live);
    let mut end = 0;
    for (start, len) in &ps {
        assert_eq!(*start, end, "gap or overlap in {ps:?}");
        end = start + len;
    }
}

/// What a follower printed (`<offset> <line>`) as it should be for `whole`:
/// each line with the offset just past it.
fn with_offsets(whole: &str) -> Vec<String> {
    let mut offset = 0u64;
    whole
        .lines()
        .map(|line| {
            offset += line.len() as u64 + 1;
            format!("{offset} {line}")
        })
        .collect()
}

/// Stops the daemon (SIGTERM, waits for it to exit), so the log is final,
/// then waits until the follower has printed exactly the whole log, each
/// line once with its offset.
fn follower_sees_the_whole_log(f: &mut Follower, mut daemon: Daemon, live: &std::path::Path) {
    signal(daemon.pid(), libc::SIGTERM);
    assert_eq!(
        daemon.wait_exit(DEADLINE),
        Some(0),
        "handoffd stops on SIGTERM"
    );
    let want = with_offsets(&rotated_log(live));
    let seen = || -> Vec<String> { f.text().lines().map(str::to_string).collect() };
    let end = std::time::Instant::now() + DEADLINE;
    while std::time::Instant::now() < end && seen() != want {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let seen = seen();
    if seen != want {
        let at = seen.iter().zip(&want).take_while(|(a, b)| a == b).count();
        panic!(
            "the follower printed {} lines, the log has {}; first difference at line {at}:\n  \
             follower: {:?}\n  log:      {:?}\n  follower {}",
            seen.len(),
            want.len(),
            seen.get(at),
            want.get(at),
            f.state()
        );
    }
}

fn delivered(p: &Project) -> usize {
    p.events()
        .iter()
        .filter(|e| e["kind"] == "delivered")
        .count()
}

#[test]
fn a_follower_reads_across_rotations_under_a_flood_without_loss_or_repeat() {
    let p = small_logs_project();
    let live = events_path(&p);
    let mut f = follow_with_offsets(&p);
    let d = p.spawn_daemon(&[]);
    let n = 200;
    flood(&p, 0..n);
    wait_until(DEADLINE, "every note delivered", || {
        delivered(&p) == n as usize
    });
    follower_sees_the_whole_log(&mut f, d, &live);
    let whole = rotated_log(&live);
    assert_contiguous(&live);
    let rotations = parts(&live).len();
    assert!(rotations > 20, "only {rotations} rotations");
    // Every file of all three logs stays near its bound.
    for log in [
        live.clone(),
        p.path(".swarmforge/daemon/handoffd.log"),
        p.path(".swarmforge/forum.log"),
    ] {
        let ps = parts(&log);
        assert!(!ps.is_empty(), "{} never rotated", log.display());
        assert!(ps.iter().all(|(_, len)| *len < 1024 + 1024), "{ps:?}");
    }
    // --since with an offset from before the rotations names the same line.
    let first = whole.lines().next().unwrap().len() as u64 + 1;
    let r = p
        .cmd("swarm")
        .args(["events", "--since", &first.to_string()])
        .run();
    r.ok();
    assert_eq!(r.stdout, whole[first as usize..]);
}

#[test]
fn kill_9_during_rotations_loses_and_repeats_no_line() {
    let p = small_logs_project();
    let live = events_path(&p);
    let mut f = follow_with_offsets(&p);
    let mut sent = 0u32;
    let kills = 5;
    for _ in 0..kills {
        let mut d = p.spawn_daemon(&[]);
        let before = parts(&live).len();
        flood(&p, sent..sent + 40);
        sent += 40;
        // Killed while it delivers and rotates (wherever it is).
        wait_until(DEADLINE, "a few rotations", || {
            parts(&live).len() >= before + 3
        });
        signal(d.pid(), libc::SIGKILL);
        // Killed by a signal: no exit code.
        assert_eq!(d.wait_exit(DEADLINE), None);
    }
    let d = p.spawn_daemon(&[]);
    wait_until(DEADLINE, "every outbox drained", || {
        files(&p.hq("master", "outbox")).is_empty()
    });
    follower_sees_the_whole_log(&mut f, d, &live);
    let whole = rotated_log(&live);
    // Every line whole: a kill never tears one or splits it across files.
    for l in whole.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{l}: {e}"));
    }
    assert_eq!(
        whole.lines().filter(|l| l.contains("\"started\"")).count(),
        kills + 1
    );
    assert_contiguous(&live);
}

#[test]
fn a_rotation_cut_short_after_its_rename_is_complete() {
    let p = Project::builder().role("a").config(SMALL_LOGS).build();
    let dir = p.path(".swarmforge/daemon");
    fs::create_dir_all(&dir).unwrap();
    let live = dir.join("events.jsonl");
    let e1 = "{\"kind\":\"x\",\"n\":1}";
    fs::write(&live, format!("{e1}\n")).unwrap();
    // What a kill -9 between the rename and the base file leaves.
    fs::rename(&live, dir.join("events.jsonl.000000000000")).unwrap();
    let _d = p.spawn_daemon(&[]);
    // handoffd.log's `started` comes before the event's line: wait for it.
    wait_until(DEADLINE, "the started event", || {
        fs::read_to_string(&live).is_ok_and(|t| t.contains("\"started\""))
    });
    let r = p.cmd("swarm").args(["events", "--with-offset"]).run();
    r.ok();
    let o1 = e1.len() + 1;
    assert!(
        r.stdout.starts_with(&format!("{o1} {e1}\n")),
        "{}",
        r.stdout
    );
    let second = r.stdout.lines().nth(1).unwrap();
    assert!(second.contains("\"started\""), "{}", r.stdout);
    assert_contiguous(&live);
    p.cmd("swarm")
        .args(["events", "--since", "3"])
        .code(1)
        .stderr_has("not at the start of a line")
        .run();
}

#[test]
fn retention_removes_old_parts_and_says_so() {
    let p = Project::builder()
        .role("a")
        .role("b")
        .config("wake: {method: none}\nlogs: {max_bytes: 1024, keep: 2}\n")
        .build();
    let live = events_path(&p);
    let mut d = p.spawn_daemon(&[]);
    flood(&p, 0..60);
    wait_until(DEADLINE, "every outbox drained", || {
        files(&p.hq("master", "outbox")).is_empty()
    });
    // Its last batch's events come after the files moved: a stopped daemon
    // has written them, so no rotation runs under the commands below.
    signal(d.pid(), libc::SIGTERM);
    assert_eq!(d.wait_exit(DEADLINE), Some(0));
    assert!(parts(&live).len() <= 2, "{:?}", parts(&live));
    assert!(parts(&live)[0].0 > 0);
    p.cmd("swarm")
        .args(["events", "--since", "0"])
        .code(1)
        .stderr_has("is no longer kept")
        .run();
    let oldest = parts(&live)[0].0.to_string();
    p.cmd("swarm")
        .args(["events", "--since", &oldest])
        .code(0)
        .run();
}

// ---- one JSON convention ----------------------------------------------------

/// Every line of stdout parses as a JSON object with `schema_version: 1`;
/// an error is one object with token, message, paths and the exit code.
fn check_json(what: &str, r: &Run) -> Vec<serde_json::Value> {
    assert!(
        !r.stdout.trim().is_empty(),
        "{what}: no JSON on stdout: {r:?}"
    );
    let docs: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: {e}: {l}")))
        .collect();
    for d in &docs {
        assert!(d.is_object(), "{what}: not an object: {d}");
        assert_eq!(d["schema_version"], 1, "{what}: {d}");
    }
    if r.code != 0 {
        let e = docs.last().unwrap();
        assert_eq!(e["exit_code"], r.code, "{what}: {e}");
        assert!(e["token"].is_string(), "{what}: {e}");
        assert!(e["message"].is_string(), "{what}: {e}");
        assert!(e["paths"].is_array(), "{what}: {e}");
        assert!(e["status"].is_string(), "{what}: {e}");
    }
    docs
}

#[test]
fn every_command_speaks_the_one_json_convention() {
    let p = Project::builder()
        .role("a")
        .role("b")
        .config("wake: {method: none}\n")
        .build();
    let outside = tempfile::tempdir().unwrap();
    let draft = p.draft("a", "type: note\nto: b\npriority: 50\nmessage: hi\n");
    let sent = p
        .cmd("swarm-handoff")
        .role("a")
        .arg("--json")
        .arg(&draft)
        .run();
    let id = check_json("swarm-handoff", &sent)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    p.deliver_once().ok();
    let man = p.root.join("man");
    let shims = p.root.join("shims");
    fs::create_dir_all(&shims).unwrap();
    let fresh = tempfile::tempdir().unwrap();
    fs::write(
        fresh.path().join("swarm.yaml"),
        "roles:\n  - {name: x, agent: human}\n",
    )
    .unwrap();
    let fresh_root = fresh.path().to_str().unwrap().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    // (program, role, args, exit code)
    let table: Vec<(&str, Option<&str>, Vec<String>, i32)> = vec![
        ("swarm", None, s(&["status", "--json"]), 0),
        ("swarm", None, s(&["stop", "--json"]), 0),
        ("swarm", None, s(&["transcript", "--json"]), 0),
        ("swarm", None, s(&["transcript", "--format", "jsonl"]), 0),
        ("swarm", None, s(&["receipts", &id, "--json"]), 0),
        ("swarm", None, s(&["audit", "--json"]), 0),
        ("swarm", None, s(&["audit", "--check", "--json"]), 0),
        ("swarm", None, s(&["events", "--json"]), 0),
        ("swarm", None, s(&["artifacts", &id, "--json"]), 0),
        ("swarm", None, s(&["session", "start", "--json"]), 0),
        ("swarm", None, s(&["session", "list", "--json"]), 0),
        (
            "swarm",
            None,
            s(&["discussion", "open", "d1", "--order", "a,b", "--json"]),
            0,
        ),
        (
            "swarm",
            None,
            s(&["discussion", "status", "d1", "--json"]),
            0,
        ),
        ("swarm", None, s(&["discussion", "list", "--json"]), 0),
        (
            "swarm",
            None,
            s(&["session", "close", "--reason", "done", "--json"]),
            0,
        ),
        (
            "swarm",
            None,
            s(&["shims", shims.to_str().unwrap(), "--json"]),
            0,
        ),
        (
            "swarm",
            None,
            s(&["man", man.to_str().unwrap(), "--json"]),
            0,
        ),
        ("swarm", None, s(&["init", &fresh_root, "--json"]), 0),
        ("swarm", None, s(&["down", "--json"]), 0),
        ("ready-next", Some("b"), s(&["--json"]), 0),
        ("done-current", Some("b"), s(&["--json"]), 0),
        ("swarm", None, s(&["inbox", "--json"]), 0),
        ("swarm", None, s(&["inbox", "--role", "b", "--json"]), 0),
        ("swarm", None, s(&["inbox", "done", "nope", "--json"]), 2),
        // No daemon runs: a finding, reported as the convention's failure.
        ("swarm", None, s(&["doctor", "--json"]), 1),
        // Errors: refusals, bad arguments, usage errors, no project.
        ("swarm", None, s(&["receipts", "nope", "--json"]), 1),
        (
            "swarm",
            None,
            s(&["transcript", "--json", "--since", "soon"]),
            1,
        ),
        (
            "swarm",
            None,
            s(&["transcript", "--format", "jsonl", "--thread", "x"]),
            1,
        ),
        ("swarm", None, s(&["events", "--json", "--since", "3"]), 1),
        ("swarm", None, s(&["artifacts", "nope", "--json"]), 1),
        ("swarm", None, s(&["audit", "--json", "--now", "x"]), 1),
        (
            "swarm",
            None,
            s(&["digest", "latest", "--session", "S9", "--json"]),
            1,
        ),
        (
            "swarm",
            None,
            s(&["discussion", "status", "nope", "--json"]),
            1,
        ),
        (
            "swarm",
            None,
            s(&["answer", &id, "--choice", "1", "--json"]),
            2,
        ),
        ("swarm", None, s(&["status", "--json", "--bogus"]), 1),
        (
            "swarm",
            None,
            s(&["stop", "--json", outside.path().to_str().unwrap()]),
            1,
        ),
        (
            "swarm",
            None,
            s(&[
                "init",
                "--json",
                p.root.join(".swarmforge").to_str().unwrap(),
            ]),
            1,
        ),
        (
            "swarm",
            None,
            s(&["down", "--json", outside.path().to_str().unwrap()]),
            1,
        ),
        ("swarm-handoff", Some("a"), s(&["--json"]), 1),
        (
            "swarm-handoff",
            Some("a"),
            s(&["--json", draft.to_str().unwrap()]),
            1,
        ),
        ("ready-next", Some("b"), s(&["--json", "--bogus"]), 1),
        ("ready-next", Some("nobody"), s(&["--json"]), 1),
        ("done-current", Some("nobody"), s(&["--json"]), 1),
    ];
    for (program, role, args, code) in &table {
        let mut c = p.cmd(program).args(args.iter());
        if let Some(r) = role {
            c = c.role(r);
        }
        let r = c.run();
        let what = format!("{program} {args:?}");
        assert_eq!(r.code, *code, "{what}: {r:?}");
        let docs = check_json(&what, &r);
        // Streams are JSON Lines; everything else is one document.
        let stream =
            args.contains(&"transcript".to_string()) || args.contains(&"events".to_string());
        if !stream {
            assert_eq!(docs.len(), 1, "{what}: {r:?}");
        }
    }
    // The same fact under the same name: the daemon's pid, a message's task
    // and body.
    for args in [["status", "--json"], ["stop", "--json"], ["down", "--json"]] {
        let v = p.cmd("swarm").args(args).run().json();
        assert!(v.get("daemon_pid").is_some(), "{args:?}: {v}");
    }
    let t = p.cmd("swarm").args(["transcript", "--json"]).run();
    let line: serde_json::Value = serde_json::from_str(t.stdout.lines().next().unwrap()).unwrap();
    for key in [
        "id",
        "from",
        "to",
        "type",
        "task",
        "body",
        "created_at",
        "path",
        "state",
    ] {
        assert!(line.get(key).is_some(), "transcript lacks {key}: {line}");
    }
}

// ---- terminal manners -------------------------------------------------------

/// Runs `swarm args` under a pseudo-terminal (`script`), so stderr is a
/// terminal; returns what the terminal showed.
fn on_a_terminal(p: &Project, args: &str, no_color: Option<&str>) -> String {
    let mut c = p
        .cmd("script")
        .args([
            "-qec",
            &format!("{} {args}", bin("swarm").display()),
            "/dev/null",
        ])
        .env("TERM", "xterm");
    if let Some(v) = no_color {
        c = c.env("NO_COLOR", v);
    }
    c.run().stdout
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let p = Project::empty();
    // A usage error (clap) and SwarmForge's red `Error:` (an agent that is
    // not installed, refused before anything starts).
    p.write(
        "swarm.yaml",
        "roles:\n  - {name: a, agent: nosuchagent-x1}\n",
    );
    git(&p.root, &["init", "-q", "-b", "master"]);
    for args in ["bogus", "up --no-tmux"] {
        let piped = p
            .cmd("swarm")
            .args(args.split(' '))
            .env("TERM", "xterm")
            .run();
        assert_ne!(piped.code, 0);
        assert!(!piped.stderr.contains('\x1b'), "{args}: {piped:?}");
        if !require_tool("script", "apt-get install -y bsdutils") {
            return;
        }
        let tty = on_a_terminal(&p, args, None);
        assert!(
            tty.contains("\x1b["),
            "{args}: no colour on a terminal: {tty:?}"
        );
        let no = on_a_terminal(&p, args, Some("1"));
        assert!(
            !no.contains('\x1b'),
            "{args}: colour despite NO_COLOR: {no:?}"
        );
        assert!(!no.trim().is_empty());
        // An empty NO_COLOR does not count (no-color.org).
        assert!(on_a_terminal(&p, args, Some("")).contains("\x1b["));
    }
}

#[test]
fn quiet_drops_progress_and_init_says_what_it_does() {
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        "roles:\n  - {name: a, agent: human}\n  - {name: b, agent: human, worktree: b}\n",
    );
    let r = p.cmd("swarm").arg("init").run();
    r.ok();
    assert!(r.stderr.contains("swarm: initialising "), "{r:?}");
    assert!(r.stderr.contains("(2 roles from "), "{r:?}");
    let q = p.cmd("swarm").args(["init", "--quiet"]).run();
    q.ok();
    assert!(q.stderr.is_empty(), "{q:?}");
    assert!(q.stdout.is_empty(), "-q prints nothing on success: {q:?}");
}

#[test]
fn rotations_whose_second_step_always_fails_still_count_exactly() {
    // A folder where the base file goes makes every rotation stop right
    // after its rename, like a kill -9 there, every time.
    let p = small_logs_project();
    let live = events_path(&p);
    fs::create_dir_all(p.path(".swarmforge/daemon/events.jsonl.base")).unwrap();
    let mut f = follow_with_offsets(&p);
    let d = p.spawn_daemon(&[]);
    flood(&p, 0..60);
    wait_until(DEADLINE, "every note delivered", || delivered(&p) == 60);
    assert!(parts(&live).len() > 5, "{:?}", parts(&live));
    assert_contiguous(&live);
    follower_sees_the_whole_log(&mut f, d, &live);
}
