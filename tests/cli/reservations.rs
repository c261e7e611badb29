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
    let r = p.swarm(&["reservations", "--json"]);
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
