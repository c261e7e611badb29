//! The collaboration example swarms (`examples/swarm/roundtable`,
//! `examples/swarm/forum`) run end to end, headless, with their scripted
//! agents; the transcript has the expected shape and the trail verifies.

use std::fs;
use std::time::Duration;

use crate::support::{copy_tree, example_dir, Project, Run, SwarmGuard};

/// `swarm <args>` in the example's folder `<temp>/swarm`.
fn swarm(p: &Project, args: &[&str]) -> Run {
    p.cmd("swarm").at("swarm").args(args).run()
}

/// The transcript's message lines (no date lines), without their times.
fn transcript_lines(p: &Project, args: &[&str]) -> Vec<String> {
    let mut a = vec!["transcript"];
    a.extend_from_slice(args);
    let t = swarm(p, &a);
    t.ok();
    t.stdout
        .lines()
        .filter(|l| !l.starts_with("--- "))
        .map(|l| match l.strip_prefix('[') {
            Some(rest) if l.as_bytes().get(9) == Some(&b']') => rest[10..].to_string(),
            _ => l.to_string(),
        })
        .collect()
}

fn check_audit(p: &Project) {
    let a = swarm(p, &["audit", "--check"]);
    assert_eq!(a.code, 0, "{}{}", a.stdout, a.stderr);
    assert!(a.stdout.starts_with("CHECK OK: "), "{}", a.stdout);
}

fn position(lines: &[String], want: &str) -> usize {
    lines
        .iter()
        .position(|l| l == want)
        .unwrap_or_else(|| panic!("no line {want:?} in\n{}", lines.join("\n")))
}

/// `roundtable` in a copy of its folder with `swarm up --no-tmux
/// --until-idle`: three questions, three deliveries, the architect's clarify
/// answered by the owner before it delivers, and a final close with reason
/// consensus.
#[test]
fn roundtable_example_runs_headless() {
    let g = Project::empty();
    let root = g.path("swarm");
    copy_tree(&example_dir("roundtable"), &root);
    let mut guard = SwarmGuard::new(&root);
    let up = g.cmd("swarm").at(&root);
    guard.guard(
        up.args(["up", "--no-tmux", "--until-idle", "--timeout", "80s"])
            .start(),
    );
    let out = guard.finish(Duration::from_secs(90), "the example swarm finishes");
    out.ok();
    let lines = transcript_lines(&g, &[]);
    assert_eq!(lines.len(), 9, "{}", lines.join("\n"));
    for (seat, q) in [
        ("architect", "How should the queue store its messages?"),
        ("tester", "How do we prove no message is lost?"),
        ("writer", "How do we explain the queue to new users?"),
    ] {
        let ask = position(&lines, &format!("[coordinator -> {seat}] post {q}"));
        let delivered = position(
            &lines,
            &format!("[{seat} -> coordinator] post {seat} recommends"),
        );
        assert!(ask < delivered);
    }
    let clarify = position(
        &lines,
        "[architect -> owner] clarify Which storage may the queue use?",
    );
    let answer = position(&lines, "[owner -> architect] answer 2. Plain files");
    let delivered = position(
        &lines,
        "[architect -> coordinator] post architect recommends",
    );
    assert!(
        clarify < answer && answer < delivered,
        "{}",
        lines.join("\n")
    );
    assert_eq!(lines[8], "[coordinator -> all] close consensus");
    // The architect's delivery carries the owner's choice and is shared
    // with the other seats; the clarify left the attention list.
    let j = swarm(
        &g,
        &["transcript", "--format", "jsonl", "--role", "architect"],
    );
    let d: serde_json::Value = j
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["type"] == "post" && v["from"] == "architect")
        .unwrap();
    assert!(
        d["body"]
            .as_str()
            .unwrap()
            .contains("(Plain files, as the owner chose)"),
        "{d}"
    );
    assert_eq!(d["headers"]["cc"], "tester,writer");
    let status = swarm(&g, &["status"]);
    assert!(!status.stdout.contains("ATTENTION"), "{}", status.stdout);
    check_audit(&g);
}

/// `forum` through `swarm demo forum` (the embedded copy): six turns in the
/// fixed order, a digest request after the third and the sixth, each
/// answered by a digest to all; the discussion closed by its cap; the
/// session transcript framed by its markers.
#[test]
fn forum_example_runs_as_a_demo() {
    let g = Project::empty();
    let root = g.path("swarm");
    let mut guard = SwarmGuard::new(&root);
    let demo = g
        .cmd("swarm")
        .args(["demo", "forum", "--timeout", "80s", "--dir"]);
    guard.guard(demo.arg(&root).start());
    let out = guard.finish(Duration::from_secs(90), "the example swarm finishes");
    out.ok();
    out.stdout_has("the demo finished after");
    let lines = transcript_lines(&g, &[]);
    let text = |who: &str, n: usize| {
        let f = fs::read_to_string(root.join(format!("lines/{who}.txt"))).unwrap();
        f.lines().nth(n).unwrap().to_string()
    };
    let mut want: Vec<String> = Vec::new();
    for round in 0..2 {
        for who in ["ada", "ben", "cy"] {
            want.push(format!("[{who} -> all] post {}", text(who, round)));
        }
    }
    let posts: Vec<&String> = lines.iter().filter(|l| l.contains("] post ")).collect();
    assert_eq!(
        posts,
        want.iter().collect::<Vec<_>>(),
        "{}",
        lines.join("\n")
    );
    let requests: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.starts_with("[handoffd -> moderator] digest_request Digest these 3 contributions")
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(requests.len(), 2, "{}", lines.join("\n"));
    assert!(requests[0] > position(&lines, &want[2]));
    assert!(requests[1] > position(&lines, &want[5]));
    let d1 = position(&lines, "[moderator -> all] digest digest 1");
    let d2 = position(&lines, "[moderator -> all] digest digest 2");
    assert!(requests[0] < d1 && d1 < requests[1] && requests[1] < d2);
    assert_eq!(lines.len(), 10, "{}", lines.join("\n"));
    // The newest digest sums up the second round.
    let latest = swarm(&g, &["digest", "latest"]);
    latest.ok();
    latest.stdout_has("subject: digest 2\n");
    latest.stdout_has(&format!("\n- ada: {}\n", text("ada", 1)));
    let st = swarm(&g, &["discussion", "status", "design"]);
    assert!(
        st.stdout.contains("TURNS: 6/6\n") && st.stdout.contains("STATE: closed cap_reached\n"),
        "{}",
        st.stdout
    );
    // The session's transcript, between its markers, is all of it.
    let list = swarm(&g, &["session", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    let id = v["sessions"][0]["id"].as_str().unwrap().to_string();
    swarm(&g, &["session", "close", "--reason", "wrap-up"]).ok();
    let framed = transcript_lines(&g, &["--session", &id]);
    assert!(
        framed[0].starts_with(&format!("=== session {id} started "))
            && framed[0].ends_with(" by ada: How should the swarm keep its state? ==="),
        "{}",
        framed[0]
    );
    assert_eq!(&framed[1..11], &lines[..]);
    assert!(framed[11].ends_with(": wrap-up ==="), "{}", framed[11]);
    check_audit(&g);
}
