//! `swarm reserve`, `swarm release`, `swarm reservations` and their MCP
//! tools; reservations in `swarm status`; the pre-commit guard `swarm up`
//! installs with `reservations: guard` (docs/reservations.md).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

fn reserve(p: &Project, role: &str, args: &[&str]) -> Run {
    let mut a = vec!["reserve"];
    a.extend_from_slice(args);
    p.cmd("swarm").role(role).args(a).run()
}

fn held(p: &Project) -> Vec<(String, Vec<String>)> {
    held_of(p.swarm(&["reservations", "--json"]))
}

/// The reservations `swarm reservations --json` printed: role and globs.
fn held_of(r: Run) -> Vec<(String, Vec<String>)> {
    r.ok();
    r.json()["reservations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["role"].as_str().unwrap().to_string(),
                r["globs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|g| g.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn a_role_reserves_others_see_it_and_an_overlap_is_refused_naming_the_holder() {
    let p = Project::coder_and_reviewer();
    p.write("src/parser.rs", "x\n");
    p.write("src/lexer.rs", "x\n");
    reserve(
        &p,
        "reviewer",
        &[
            "src/parser.rs",
            "docs/**",
            "--ttl",
            "2h",
            "--reason",
            "rewriting the parser",
        ],
    )
    .ok()
    .stdout_has("RESERVED: ")
    .stdout_has("reviewer holds src/parser.rs docs/** until ");
    assert_eq!(
        held(&p),
        [(
            "reviewer".to_string(),
            vec!["src/parser.rs".to_string(), "docs/**".to_string()]
        )]
    );
    // One file per reservation, in the project.
    assert_eq!(
        files(&p.path(".swarmforge/reservations"))
            .iter()
            .filter(|f| f.ends_with(".json"))
            .count(),
        1
    );
    // Shown in status (text and JSON).
    let s = p.swarm(&["status"]);
    s.ok()
        .stdout_has("reserved: reviewer holds src/parser.rs docs/** until ");
    s.stdout_has("(rewriting the parser)");
    assert_eq!(
        p.swarm(&["status", "--json"]).json()["reservations"][0]["role"],
        "reviewer"
    );
    // Another role's overlapping glob: refused (exit 2), naming the holder.
    let r = reserve(&p, "coder", &["src/*.rs"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    r.stderr_has("RESERVED")
        .stderr_has("src/*.rs overlaps src/parser.rs: reviewer holds")
        .stderr_has("ask reviewer to run `swarm release`");
    assert_eq!(held(&p).len(), 1);
    // Not overlapping: granted. The same role again: granted.
    reserve(&p, "coder", &["src/lexer.rs"]).ok();
    reserve(&p, "reviewer", &["src/parser.rs"]).ok();
    // --force takes it and says with whom it overlaps.
    reserve(&p, "coder", &["docs/readme.md", "--force"])
        .ok()
        .stdout_has("overlapping (taken with --force): reviewer holds");
    assert_eq!(held(&p).len(), 4);
    // Release: one glob, then the rest; a glob not held is refused.
    let r = p
        .cmd("swarm")
        .role("coder")
        .args(["release", "src/parser.rs"])
        .run();
    assert_eq!(r.code, 2);
    r.stderr_has("NOT_RESERVED").stderr_has(
        "coder holds no reservation of src/parser.rs; it holds: src/lexer.rs docs/readme.md",
    );
    p.cmd("swarm")
        .role("coder")
        .args(["release", "src/lexer.rs"])
        .run()
        .ok()
        .stdout_has("RELEASED: src/lexer.rs (coder)");
    p.cmd("swarm").role("reviewer").args(["release"]).run().ok();
    assert_eq!(
        held(&p),
        [("coder".to_string(), vec!["docs/readme.md".to_string()])]
    );
}

#[test]
fn a_reservation_expires_by_its_time_to_live() {
    let p = Project::coder_and_reviewer();
    // Its file says when it ends (no timed assertion: the machine may be
    // slower than the TTL).
    let r = reserve(&p, "reviewer", &["a.txt", "--ttl", "1s", "--json"]);
    r.ok();
    let v = r.json();
    let (made, ends) = (
        chrono::DateTime::parse_from_rfc3339(v["reservation"]["created_at"].as_str().unwrap())
            .unwrap(),
        chrono::DateTime::parse_from_rfc3339(v["reservation"]["expires_at"].as_str().unwrap())
            .unwrap(),
    );
    assert_eq!((ends - made).num_seconds(), 1, "{v}");
    wait_until(DEADLINE, "the reservation expired", || held(&p).is_empty());
    // Expired: no longer in the way.
    reserve(&p, "coder", &["a.txt"]).ok();
}

#[test]
fn globs_that_leave_the_project_and_bad_input_are_refused() {
    let p = Project::coder_and_reviewer();
    for (g, why) in [
        ("../outside.txt", "escapes the project"),
        ("src/../../x", "escapes the project"),
        ("/etc/passwd", "escapes the project"),
        ("a/[bc]", "only *, ? and ** are understood"),
        (".git/hooks/pre-commit", ".git is not a file of the project"),
    ] {
        let r = reserve(&p, "coder", &[g]);
        assert_eq!(r.code, 1, "{g}: {}", r.stdout);
        r.stderr_has(why);
    }
    let r = reserve(&p, "coder", &["x", "--ttl", "soon"]);
    assert_eq!(r.code, 1);
    r.stderr_has("--ttl: ");
    let r = reserve(&p, "coder", &["x", "--ttl", "0s"]);
    assert_eq!(r.code, 1);
    r.stderr_has("--ttl must be more than 0");
    // An absolute glob inside the project is taken relative to it; one in a
    // subfolder is prefixed with it.
    let abs = format!("{}/src/a.rs", p.root.display());
    reserve(&p, "coder", &[&abs])
        .ok()
        .stdout_has("coder holds src/a.rs until");
    std::fs::create_dir_all(p.path("src/deep")).unwrap();
    p.cmd("swarm")
        .role("coder")
        .at(p.path("src/deep"))
        .args(["reserve", "*.rs"])
        .run()
        .ok()
        .stdout_has("coder holds src/deep/*.rs until");
    // A planted file that is not a reservation is skipped with a warning.
    p.write(".swarmforge/reservations/evil.json", "{\"id\":\"../x\"}");
    p.swarm(&["reservations"])
        .ok()
        .stderr_has("warning: skipped")
        .stderr_has("evil.json");
}

#[test]
fn who_is_me_comes_from_the_role_variable_or_the_worktree() {
    let p = Project::coder_and_reviewer();
    // No SWARMFORGE_ROLE: in reviewer's worktree, reviewer.
    p.cmd("swarm")
        .at(p.wt_path("rev"))
        .args(["reserve", "r.txt"])
        .run()
        .ok()
        .stdout_has("reviewer holds r.txt");
    // A person names the role with --as.
    p.swarm(&["reserve", "--as", "coder", "c.txt"])
        .ok()
        .stdout_has("coder holds c.txt");
    // An agent may not act as another role.
    let r = p
        .cmd("swarm")
        .role("coder")
        .args(["release", "--as", "reviewer"])
        .run();
    assert_eq!(r.code, 2);
    r.stderr_has("PERSON_ONLY");
    let r = p.swarm(&["reserve", "--as", "ghost", "x"]);
    assert_eq!(r.code, 1);
    r.stderr_has("Unknown role: ghost");
}

/// `swarm up` headless until its agents (`true`) are done.
fn up_until_idle(d: &Project) -> Run {
    let mut guard = SwarmGuard::new(&d.root);
    guard.guard(
        d.cmd("swarm")
            .args(["up", "--no-tmux", "--until-idle", "--timeout", "30s"])
            .arg(&d.root)
            .start(),
    );
    guard.finish(Duration::from_secs(60), "swarm up --until-idle returns")
}

fn git_ok(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    clean_command(std::path::Path::new("git"), dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn swarm_up_installs_a_guard_that_refuses_a_commit_touching_another_roles_files() {
    let d = Project::empty();
    git(&d.root, &["init", "-q", "-b", "master"]);
    d.write("README", "x\n");
    git(&d.root, &["add", "."]);
    git(&d.root, &["commit", "-q", "-m", "init"]);
    d.write(
        "swarm.yaml",
        "reservations: guard\nwake: {method: none}\nlaunch: {stagger: 0ms}\nroles:\n  - name: coder\n    agent: \"true\"\n    worktree: coder\n  - name: reviewer\n    agent: \"true\"\n    worktree: reviewer\n",
    );
    up_until_idle(&d).ok().stdout_has("reservations guard: ");
    let hook = d.path(".git/hooks/pre-commit");
    assert!(std::fs::read_to_string(&hook)
        .unwrap()
        .contains("reservations --guard"));
    let coder = d.path(".worktrees/coder");
    let reviewer = d.path(".worktrees/reviewer");
    d.cmd("swarm")
        .role("reviewer")
        .args(["reserve", "src/**", "--reason", "big refactor"])
        .run()
        .ok();
    std::fs::create_dir_all(coder.join("src")).unwrap();
    std::fs::write(coder.join("src/a.rs"), "x\n").unwrap();
    std::fs::write(coder.join("notes.txt"), "x\n").unwrap();
    git(&coder, &["add", "src/a.rs"]);
    // As the agent commits (its role in its environment) and as a person in
    // that worktree: refused, naming the holder and the override.
    for role in [Some("coder"), None] {
        let mut c = clean_command(std::path::Path::new("git"), &coder);
        if let Some(r) = role {
            c.env("SWARMFORGE_ROLE", r);
        }
        let o = c.args(["commit", "-q", "-m", "touch a"]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{err}");
        assert!(
            err.contains("commit refused: 1 staged file(s) reserved by another role"),
            "{err}"
        );
        assert!(
            err.contains("src/a.rs: reserved by reviewer (src/**) until")
                && err.contains("(big refactor)"),
            "{err}"
        );
        assert!(err.contains("git commit --no-verify"), "{err}");
    }
    // A file nobody holds commits; the holder's own commit passes its guard.
    git(&coder, &["reset", "-q"]);
    git(&coder, &["add", "notes.txt"]);
    assert!(git_ok(&coder, &["commit", "-q", "-m", "notes"])
        .status
        .success());
    std::fs::create_dir_all(reviewer.join("src")).unwrap();
    std::fs::write(reviewer.join("src/b.rs"), "x\n").unwrap();
    git(&reviewer, &["add", "src/b.rs"]);
    let o = git_ok(&reviewer, &["commit", "-q", "-m", "mine"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Released: the coder's commit goes through.
    d.cmd("swarm").role("reviewer").args(["release"]).run().ok();
    git(&coder, &["add", "src/a.rs"]);
    let o = git_ok(&coder, &["commit", "-q", "-m", "touch a"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Someone else's hook is never overwritten.
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    up_until_idle(&d)
        .ok()
        .stdout_has("reservations guard NOT installed");
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
}

#[test]
fn the_mcp_reservation_tools_act_as_the_servers_role() {
    let Some(py) = crate::mcp::python() else {
        return;
    };
    let p = Project::coder_and_reviewer();
    let mut c = crate::mcp::Client::start(&py, &p, "reviewer", &[]);
    let v = c.ok(
        "reserve",
        json!({"globs": ["src/**"], "ttl": "30m", "reason": "tests"}),
    );
    assert_eq!(v["reservation"]["role"], "reviewer", "{v}");
    let v: Value = c.ok("reservations", json!({}));
    assert_eq!(v["reservations"][0]["globs"], json!(["src/**"]), "{v}");
    let r = reserve(&p, "coder", &["src/x.rs"]);
    assert_eq!(r.code, 2);
    let e = c.call("reserve", json!({"globs": ["../../etc/*"]}));
    assert_eq!(e["is_error"], true, "{e}");
    assert!(
        e["text"].as_str().unwrap().contains("escapes the project"),
        "{e}"
    );
    let v = c.ok("release", json!({}));
    assert_eq!(v["released"], json!(["src/**"]), "{v}");
    reserve(&p, "coder", &["src/x.rs"]).ok();
}

/// What the confined agent of `a_confined_agent_reserves_and_releases_through_handoffd`
/// does (each command's exit code in results.txt, its output in
/// `<what>.out` / `<what>.err` in its worktree).
const RESERVING_AGENT: &str = r#"set -u
r="$PWD/results.txt"
: >"$r"
P="$SWARMFORGE_PROJECT"
run() { what=$1; shift; "$@" >"$what.out" 2>"$what.err"; echo "$what: $?" >>"$r"; }
run reserve swarm reserve 'src/**' 'lib/**' --reason 'from the sandbox'
run overlap swarm reserve docs/a.md
run release_lib swarm release 'lib/**'
run release_theirs swarm release --as reviewer
run reserve_theirs swarm reserve --as reviewer 'x/**'
run as_them env SWARMFORGE_ROLE=reviewer SWARM_CONFINED=reviewer swarm reserve 'x/**'
run sandbox_of_them env SWARM_CONFINED=reviewer swarm reserve 'x/**'
run direct sh -c "echo '{}' >'$P/.swarmforge/reservations/forged.json'"
run erase sh -c "rm -f '$P'/.swarmforge/reservations/*.json"
run their_folder sh -c "mkdir -p '$P/.swarmforge/agents/reviewer/requests' && printf 'op: release\n\n' >'$P/.swarmforge/agents/reviewer/requests/00000000000000aa.request'"
q="$P/.swarmforge/agents/coder/requests"
ask() { printf "$2" >"$q/tmp.$1" && mv "$q/tmp.$1" "$q/$1.request"; }
ask 00000000000000bb 'op: release\nrole: reviewer\n\ndocs/**\n'
ask 00000000000000cc 'op: reserve\nforce: true\nreason: forged\nrole: reviewer\nttl_ms: 60000\n\nz/**\n'
ask 00000000000000dd 'op: release\n\ndocs/**\n'
for id in bb cc dd; do
  i=0
  until [ -f "$q/00000000000000$id.answer" ] || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done
  cp "$q/00000000000000$id.answer" "forged_$id.answer"
done
echo done >>"$r"
"#;

/// A confined agent (bubblewrap, `swarm up`) cannot write
/// `.swarmforge/reservations/`, yet reserves and releases: handoffd does it
/// in its role's name (docs/reservations.md), and the command prints what
/// and exits as the direct one. It cannot act in another role's name: not
/// by `--as` or its environment (its ancestry says who it is), not by a
/// role named in a request it writes itself (refused), not by a request in
/// another role's launcher folder (read-only to it).
#[test]
fn a_confined_agent_reserves_and_releases_through_handoffd() {
    if crate::support::require_bwrap().is_none() {
        return;
    }
    let g = Project::empty();
    let root = g.path("swarm");
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(root.join("agents/coder.sh"), RESERVING_AGENT).unwrap();
    std::fs::write(
        root.join("swarm.yaml"),
        "launch: {stagger: 0ms}\nroles:\n  - {name: coder, worktree: coder, agent: sh \"$SWARMFORGE_PROJECT/agents/coder.sh\"}\n  - {name: reviewer, worktree: reviewer, agent: \"true\"}\n",
    )
    .unwrap();
    let person = |args: &[&str]| g.cmd("swarm").at(&root).args(args).run();
    person(&["init", "--quiet"]).ok();
    person(&[
        "reserve",
        "--as",
        "reviewer",
        "docs/**",
        "--reason",
        "the person's",
    ])
    .ok();
    let mut guard = SwarmGuard::new(&root);
    guard.guard(
        g.cmd("swarm")
            .at(&root)
            .args(["up", "--no-tmux", "--until-idle", "--timeout", "60s"])
            .start(),
    );
    let up = guard.finish(Duration::from_secs(90), "the swarm finishes");
    let wt = root.join(".worktrees/coder");
    let read = |f: &str| std::fs::read_to_string(wt.join(f)).unwrap_or_default();
    let results = read("results.txt");
    let log =
        std::fs::read_to_string(root.join(".swarmforge/agents/coder.log")).unwrap_or_default();
    assert!(
        results.ends_with("done\n"),
        "{results}\n{log}\n{}\n{}",
        up.stdout,
        up.stderr
    );
    let code = |what: &str| {
        results
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{what}: ")))
            .unwrap_or_else(|| panic!("{what} did not run:\n{results}"))
            .to_string()
    };
    // Its own: reserved and released as the direct command does.
    assert_eq!(code("reserve"), "0", "{}\n{log}", read("reserve.err"));
    let out = read("reserve.out");
    assert!(
        out.starts_with("RESERVED: ")
            && out.contains(" coder holds src/** lib/** until ")
            && out.ends_with(" (from the sandbox)\n"),
        "{out}"
    );
    assert_eq!(code("release_lib"), "0", "{}", read("release_lib.err"));
    assert_eq!(read("release_lib.out"), "RELEASED: lib/** (coder)\n");
    // An overlap: refused as the direct command refuses it (the same
    // words, the same exit code).
    let direct = g
        .cmd("swarm")
        .at(&wt)
        .role("coder")
        .args(["reserve", "docs/a.md"])
        .run();
    assert_eq!(direct.code, 2, "{}", direct.stderr);
    assert_eq!(code("overlap"), "2");
    assert_eq!(read("overlap.err"), direct.stderr);
    assert!(
        direct
            .stderr
            .contains("docs/a.md overlaps docs/**: reviewer holds docs/** until "),
        "{}",
        direct.stderr
    );
    // Another role's name, however asked: refused.
    for what in [
        "release_theirs",
        "reserve_theirs",
        "as_them",
        "sandbox_of_them",
    ] {
        assert_eq!(code(what), "2", "{what}: {}", read(&format!("{what}.err")));
        assert!(
            read(&format!("{what}.err")).contains("PERSON_ONLY"),
            "{what}"
        );
    }
    for what in ["direct", "erase", "their_folder"] {
        assert_ne!(code(what), "0", "{what} was not refused");
    }
    let forged = read("forged_bb.answer") + &read("forged_cc.answer");
    assert_eq!(
        forged
            .matches("'role' is not a field of this request")
            .count(),
        2,
        "{forged}"
    );
    let theirs = read("forged_dd.answer");
    assert!(
        theirs.contains("token: NOT_RESERVED")
            && theirs.contains("coder holds no reservation of docs/**; it holds: src/**"),
        "{theirs}"
    );
    // Seen outside: the reviewer's reservation untouched, the coder's in
    // its own name, nothing forged.
    let mut seen = held_of(person(&["reservations", "--json"]));
    seen.sort();
    assert_eq!(
        seen,
        [
            ("coder".to_string(), vec!["src/**".to_string()]),
            ("reviewer".to_string(), vec!["docs/**".to_string()]),
        ]
    );
    assert!(!root.join(".swarmforge/reservations/forged.json").exists());
    assert!(files(&root.join(".swarmforge/agents/reviewer/requests")).is_empty());
    let coder = person(&["reservations", "--json"]).json();
    assert!(
        coder["reservations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["role"] == "coder" && r["request"].is_string()),
        "{coder}"
    );
}

/// A confined agent's reservation requests survive a handoffd kill (-9):
/// one taken and not carried out is carried out by the next daemon; one
/// carried out whose taken request was left is answered again from the
/// reservation it made, and nothing is taken twice.
#[test]
fn a_confined_agents_reservation_request_is_carried_out_once_across_a_daemon_kill() {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("reviewer").at("rev"))
        .config("daemon: {rescan: 100ms}\nwake: {method: none}\n")
        .build();
    let d = p.spawn_daemon(&[]);
    // Through the running daemon: the same output as the direct command.
    p.cmd("swarm")
        .role("coder")
        .env("SWARM_CONFINED", "coder")
        .args(["reserve", "src/**", "--reason", "asked"])
        .run()
        .ok()
        .stdout_has("RESERVED: ")
        .stdout_has("coder holds src/** until ");
    let r = p
        .cmd("swarm")
        .role("coder")
        .env("SWARM_CONFINED", "coder")
        .args(["release", "docs/**", "--json"])
        .run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(r.json()["token"], "NOT_RESERVED");
    drop(d); // kill -9

    let taken = p.path(".swarmforge/daemon/requests/coder");
    let asked = p.path(".swarmforge/agents/coder/requests");
    std::fs::create_dir_all(&taken).unwrap();
    let req = "0000000000000000e5e";
    let answer = asked.join(format!("{req}.answer"));
    let mut made = None;
    for round in 0..2 {
        // Round 0: taken, then killed before it was carried out. Round 1:
        // killed after carrying it out, before removing it.
        std::fs::write(
            taken.join(format!("{req}.request")),
            "op: reserve\nforce: false\nreason: kept\nttl_ms: 600000\n\nlib/**\n",
        )
        .unwrap();
        let d = p.spawn_daemon(&[]);
        wait_until(DEADLINE, "the request answered", || {
            answer.exists() && !taken.join(format!("{req}.request")).exists()
        });
        drop(d);
        let a = std::fs::read_to_string(&answer).unwrap();
        std::fs::remove_file(&answer).unwrap();
        assert!(a.starts_with("outcome: done\n"), "round {round}: {a}");
        let v: Value = serde_json::from_str(a.split_once("\n\n").unwrap().1.trim()).unwrap();
        assert_eq!(v["reservation"]["role"], "coder", "{v}");
        let id = v["reservation"]["id"].as_str().unwrap().to_string();
        assert_eq!(made.get_or_insert(id.clone()), &id, "round {round}");
        let mut seen = held(&p);
        seen.sort();
        assert_eq!(
            seen,
            [
                ("coder".to_string(), vec!["lib/**".to_string()]),
                ("coder".to_string(), vec!["src/**".to_string()]),
            ],
            "round {round}"
        );
    }
    assert!(files(&taken).is_empty(), "{:?}", files(&taken));
}

/// A hostile checkout cannot stall handoffd through a reservation request:
/// the listing of its files (`git ls-files`) that tells which files two
/// globs share is bounded in time (a FIFO named `.gitignore` blocks git for
/// ever) and in output (a tree of untracked files with long names). Past
/// either bound the request is refused with the reason and the repair; the
/// daemon goes on delivering and answers the next request.
#[test]
fn a_hostile_checkout_cannot_stall_handoffd_with_a_reservation_request() {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("reviewer").at("rev"))
        .config("daemon: {rescan: 100ms}\nwake: {method: none}\n")
        .build();
    let _d = p.spawn_daemon(&[]);
    let confined = |globs: &str| {
        p.cmd("swarm")
            .role("coder")
            .env("SWARM_CONFINED", "coder")
            .args(["reserve", globs, "--reason", "asked"])
            .run()
    };
    let refused = |r: &Run, why: &str| {
        assert_ne!(r.code, 0, "{r:?}");
        assert!(
            r.stderr.contains(&format!(
                "cannot tell which files of {} the globs name: git ls-files {why}",
                p.root.display()
            )) && r.stderr.contains("hint: remove what makes the listing"),
            "{}",
            r.stderr
        );
    };

    // Slow: git opens the FIFO to read its ignore rules, and waits.
    std::fs::create_dir_all(p.root.join("slow")).unwrap();
    crate::hostile::mkfifo(&p.root.join("slow/.gitignore"));
    let r = confined("src/**");
    refused(&r, "timed out after 5s");
    std::fs::remove_dir_all(p.root.join("slow")).unwrap();

    // Huge: some 9 MiB of file names, each over 3 000 bytes long.
    let mut deep = p.root.join("huge");
    for c in 'a'..='l' {
        deep.push(c.to_string().repeat(250));
    }
    std::fs::create_dir_all(&deep).unwrap();
    for i in 0..2900 {
        std::fs::write(deep.join(format!("{i:04}{}", "x".repeat(240))), "").unwrap();
    }
    let r = confined("src/**");
    refused(&r, &format!("printed more than {} bytes", 8 * 1024 * 1024));
    std::fs::remove_dir_all(p.root.join("huge")).unwrap();

    // The daemon still delivers and answers.
    let sent = p.post("master", &note("coder", 1, "reviewer", "still delivered"));
    wait_delivered(&p, &sent);
    confined("src/**")
        .ok()
        .stdout_has("RESERVED: ")
        .stdout_has("coder holds src/** until ");
    assert_eq!(
        held(&p),
        [("coder".to_string(), vec!["src/**".to_string()])]
    );
}
