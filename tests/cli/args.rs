//! Command lines: every binary parses its arguments with its clap
//! definition (the one its man page and completions are made from), refuses
//! an argument that is not valid UTF-8 with a usage error (exit 1) instead
//! of a panic, and keeps SwarmForge's answers to a bad command line.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::support::Project;

fn bad() -> &'static OsStr {
    OsStr::from_bytes(b"dr\xffa.txt")
}

/// Exit 1, something said on stderr, nothing on stdout, no panic.
#[track_caller]
fn refused_cleanly(r: &crate::support::Run, what: &str) {
    assert_eq!(r.code, 1, "{what}: {r:?}");
    assert!(!r.stderr.is_empty(), "{what}: says why");
    assert!(!r.stderr.contains("panicked"), "{what}: {}", r.stderr);
    assert_eq!(r.stdout, "", "{what}");
}

#[test]
fn the_agent_helper_and_the_daemon_name_the_argument_that_is_not_utf8() {
    let p = Project::new(&[("coder", "task")]);
    let hint = "\n  hint: name files and folders with UTF-8 paths\n";
    p.cmd("swarm-handoff")
        .role("coder")
        .arg(bad())
        .code(1)
        .stdout("")
        .stderr(&format!(
            "argument 1 is not valid UTF-8: dr\\xFFa.txt{hint}"
        ))
        .run();
    p.cmd("handoffd")
        .arg("--once")
        .arg(p.root.join(bad()))
        .code(1)
        .stdout("")
        .stderr(&format!(
            "handoffd: argument 2 is not valid UTF-8: {}/dr\\xFFa.txt{hint}",
            p.root.display()
        ))
        .run();
    // With --json the refusal is also one JSON object on stdout.
    let r = p
        .cmd("swarm-handoff")
        .role("coder")
        .arg("--json")
        .arg(bad())
        .code(1)
        .run();
    let v = r.json();
    assert_eq!(v["status"], "error");
    assert_eq!(v["exit_code"], 1);
    assert!(
        v["message"].as_str().unwrap().contains("not valid UTF-8"),
        "{v}"
    );
    assert!(p.files(&p.handoffs("outbox")).is_empty(), "nothing queued");
}

#[test]
fn every_other_binary_refuses_a_non_utf8_argument_without_a_panic() {
    let p = Project::new(&[("coder", "task")]);
    let cases: Vec<(&str, Vec<&OsStr>)> = vec![
        ("ready-next", vec![bad()]),
        ("done-current", vec![OsStr::new("--failed"), bad()]),
        ("swarm", vec![bad()]),
        (
            "swarm",
            vec![OsStr::new("transcript"), OsStr::new("--session"), bad()],
        ),
    ];
    for (program, args) in cases {
        let r = p.cmd(program).role("coder").args(args.clone()).run();
        refused_cleanly(&r, &format!("{program} {args:?}"));
    }
}

#[test]
fn a_bad_command_line_still_gets_swarmforges_answers() {
    let p = Project::new(&[("coder", "task")]);
    // Any one argument is the draft's path, as in SwarmForge.
    for arg in ["--draft", "-", "-x"] {
        p.cmd("swarm-handoff")
            .role("coder")
            .arg(arg)
            .code(1)
            .stderr(&format!("Draft file not found: {arg}\n"))
            .run();
    }
    // --json and the draft in either order; a repeated flag is one flag.
    for args in [
        &["--json", "gone.txt"][..],
        &["gone.txt", "--json"],
        &["--json", "--json", "gone.txt"],
    ] {
        let r = p
            .cmd("swarm-handoff")
            .role("coder")
            .args(args)
            .code(1)
            .run();
        assert_eq!(
            r.json()["message"],
            "Draft file not found: gone.txt",
            "{args:?}"
        );
    }
    let r = p
        .cmd("swarm-handoff")
        .role("coder")
        .args(["--json", "a", "b"])
        .code(1)
        .run();
    assert!(r
        .stderr
        .starts_with("Usage: swarm_handoff.sh <draft-file>\n"));
    assert_eq!(r.json()["message"], "expected one draft file, got 2");
    // handoffd: its usage line for anything but [--once] [--poll] <root>.
    for args in [&[][..], &["--bogus", "x"], &["x", "y"], &["--once"]] {
        p.cmd("handoffd")
            .args(args)
            .code(1)
            .stdout("")
            .stderr("Usage: handoffd [--once] [--poll] <project-root>\n")
            .run();
    }
    let root = p.root.to_str().unwrap();
    p.cmd("handoffd")
        .args(["--once", "--once", "--poll", root])
        .code(0)
        .run();
    for (program, flag, want) in [
        (
            "handoffd",
            "--help",
            "Usage: handoffd [--once] [--poll] <project-root>\n\n",
        ),
        (
            "swarm-handoff",
            "-h",
            "Queue a draft in this worktree's outbox",
        ),
        ("handoffd", "-V", "handoffd "),
        ("swarm-handoff", "--version", "swarm-handoff "),
    ] {
        let r = p.cmd(program).arg(flag).code(0).stderr("").run();
        assert!(r.stdout.starts_with(want), "{program} {flag}: {}", r.stdout);
    }
}

/// `swarm --version` names the version (Cargo.toml's) and the commit the
/// binary was built from (build.rs: SWARM_BUILD_COMMIT, else git), as a
/// packaged binary must (issue 45); the daemon's answer stays
/// `handoffd <version>`, which doctor compares with its own.
#[test]
fn swarm_version_names_the_commit_it_was_built_from() {
    let p = Project::new(&[("coder", "task")]);
    let r = p.cmd("swarm").arg("--version").code(0).stderr("").run();
    let line = r.stdout.trim_end();
    let want = format!("swarm {} (commit ", env!("CARGO_PKG_VERSION"));
    let commit = line
        .strip_prefix(&want)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("swarm --version: {line}"));
    assert!(
        !commit.is_empty()
            && commit
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'),
        "swarm --version: {line}"
    );
    let r = p.cmd("handoffd").arg("--version").code(0).run();
    assert_eq!(
        r.stdout.trim_end(),
        format!("handoffd {}", env!("CARGO_PKG_VERSION"))
    );
}
