//! Lineups (docs/lineups.md): `swarm role add/remove` change a running
//! swarm, agent definitions from swarm.yaml and the user's folder, and
//! nothing lost: a removed role's waiting mail goes back to its senders.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

/// A scripted agent: takes and finishes every waiting item, then exits.
const DRAIN: &str = "#!/bin/sh\nset -eu\nout=$(ready-next)\nuntil printf '%s\\n' \"$out\" | grep -qx NO_TASK; do\n    out=$(done-current)\ndone\n";

const DRAIN_AGENT: &str = "sh \"$SWARMFORGE_PROJECT/agents/drain.sh\"";

/// `lead` (a person), `worker` from the `drainer` definition, and `extra`.
fn project(extra: &str) -> Project {
    let d = Project::empty();
    d.write("agents/drain.sh", DRAIN);
    d.write(
        "swarm.yaml",
        &format!(
            "# the team\nlaunch:\n  stagger: 50ms\nagents:\n  - name: drainer\n    agent: {DRAIN_AGENT}\n    description: drains its queue\nroles:\n  - name: lead\n    agent: human   # a person\n  - name: worker\n    from: drainer\n    worktree: worker\n{extra}"
        ),
    );
    d
}

fn note(to: &str, n: usize) -> String {
    format!("type: note\nto: {to}\npriority: 50\nmessage: m{n}\n")
}

fn wt(d: &Project, role: &str) -> PathBuf {
    d.path(&format!(".worktrees/{role}"))
}

fn lead_box(d: &Project) -> PathBuf {
    d.path(".swarmforge/people/lead")
}

fn count(dir: &Path) -> usize {
    fs::read_dir(dir).map(|r| r.count()).unwrap_or(0)
}

fn roles_tsv_names(d: &Project) -> Vec<String> {
    d.read(".swarmforge/roles.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
}

/// The notes in lead's inbox that return an item, by the id they answer.
fn returned_to_lead(d: &Project) -> Vec<String> {
    walk(&lead_box(d))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "handoff"))
        .filter_map(|p| {
            let text = fs::read_to_string(&p).ok()?;
            let msg = header(&text, "message")?;
            msg.starts_with("returned:")
                .then(|| header(&text, "in_reply_to").map(str::to_string))?
        })
        .collect()
}

#[test]
fn removed_roles_waiting_mail_goes_back_to_its_senders() {
    let d = project(&format!(
        "  - name: spare\n    agent: {DRAIN_AGENT}\n    worktree: spare\n"
    ));
    d.swarm(&["init"]).ok();
    let _daemon = d.spawn_daemon(&[]);
    let mut ids = Vec::new();
    for n in 0..3 {
        let r = d.send("lead", &note("spare", n));
        r.ok();
        ids.push(
            r.stdout
                .split_whitespace()
                .find(|w| w.contains('-'))
                .unwrap_or_default()
                .to_string(),
        );
    }
    let new = hq(&wt(&d, "spare"), "inbox/new");
    wait_until(WAIT, "three items wait for spare", || count(&new) == 3);
    // One of them is in process: its agent took it and went away.
    d.cmd("ready-next")
        .role("spare")
        .at(wt(&d, "spare"))
        .run()
        .ok();
    assert_eq!(count(&hq(&wt(&d, "spare"), "inbox/in_process")), 1);
    assert!(d.swarm(&["prompt", "worker"]).stdout.contains("spare"));

    let r = d.swarm(&["role", "remove", "spare", "--reason", "not needed any more"]);
    r.ok();
    r.stdout_has("ROLE REMOVED: spare (3 waiting item(s) returned to their senders");
    // Its worktree stays, back on an ordinary branch (it was pinned while
    // its agent ran confined: docs/security.md "Branches"), so removing
    // the folder later cannot take the branch along.
    assert!(
        r.stderr
            .contains("back on its ordinary branch swarmforge-spare"),
        "{}",
        r.stderr
    );
    assert_eq!(
        crate::support::git(&wt(&d, "spare"), &["symbolic-ref", "HEAD"]),
        "refs/heads/swarmforge-spare"
    );
    // Every item is closed in spare's inbox, failed with the reason.
    let done = hq(&wt(&d, "spare"), "inbox/completed");
    let completed = files(&done);
    assert_eq!(completed.len(), 3, "{completed:?}");
    for f in &completed {
        assert_eq!(
            file_header(&done.join(f), "failed").as_deref(),
            Some("not needed any more")
        );
    }
    assert_eq!(count(&new), 0);
    // Each came back to lead as a note answering it.
    wait_until(WAIT, "three returns reach lead", || {
        returned_to_lead(&d).len() == 3
    });
    assert!(!roles_tsv_names(&d).contains(&"spare".to_string()));
    assert!(!d.swarm(&["prompt", "worker"]).stdout.contains("spare"));
    assert!(d
        .events()
        .iter()
        .any(|e| e["kind"] == "seat_removed" && e["recipient"] == "spare"));

    // Sent afterwards: refused at once, with why.
    let r = d.send("lead", &note("spare", 9));
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        (r.stdout.clone() + &r.stderr).contains("role spare was removed from the lineup"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    // Written past the sender's check: the daemon refuses it to failed/.
    let planted = note_at(
        "lead",
        "20260615T140531Z",
        7,
        "spare",
        "late",
        "2026-06-15T14:05:31.000000Z",
    );
    drop_in_outbox(&lead_box(&d), &planted.name, planted.text.as_bytes());
    let failed = hq(&lead_box(&d), "failed");
    wait_until(WAIT, "the late file is refused", || {
        failed.join(format!("{}.error", planted.name)).exists()
    });
    let why = fs::read_to_string(failed.join(format!("{}.error", planted.name))).unwrap();
    assert!(
        why.contains("role spare was removed from the lineup"),
        "{why}"
    );
    let r = d.swarm(&["role", "list"]);
    r.ok();
    r.stdout_has("spare  removed at");
    d.swarm(&["audit", "--check"]).ok();
}

#[test]
fn a_role_added_and_removed_under_traffic_loses_and_doubles_nothing() {
    let d = project("");
    let mut guard = SwarmGuard::new(&d.root);
    d.swarm(&["up", "--no-tmux", "--detach"]).ok();
    let stop = AtomicBool::new(false);
    // (recipient, exit code, output) of every send, in order.
    let sent: Mutex<Vec<(String, i32, String)>> = Mutex::new(Vec::new());
    let after_removal = |sent: &Mutex<Vec<(String, i32, String)>>, from: usize| {
        sent.lock().unwrap()[from..]
            .iter()
            .filter(|(to, code, _)| to == "worker" && *code == 0)
            .count()
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let to = if n % 2 == 0 { "worker" } else { "helper" };
                let r = d.send("lead", &note(to, n));
                sent.lock()
                    .unwrap()
                    .push((to.to_string(), r.code, r.stdout + &r.stderr));
                n += 1;
            }
        });
        let done = |role: &str| count(&hq(&wt(&d, role), "inbox/completed"));
        wait_until(WAIT, "worker works", || done("worker") >= 3);
        let r = d.swarm(&["role", "add", "helper", "--from", "drainer"]);
        r.ok();
        r.stdout_has("ROLE ADDED: helper");
        wait_until(WAIT, "helper works", || done("helper") >= 3);
        assert!(d.swarm(&["prompt", "worker"]).stdout.contains("helper"));
        d.swarm(&["role", "remove", "helper"]).ok();
        let mark = sent.lock().unwrap().len();
        wait_until(WAIT, "traffic goes on after the removal", || {
            after_removal(&sent, mark) >= 3
        });
        stop.store(true, Ordering::Relaxed);
    });
    let sent = sent.into_inner().unwrap();
    // What was refused to helper was refused for a reason a person can act on.
    let refused_late: Vec<&String> = sent
        .iter()
        .filter(|(to, code, out)| {
            to == "helper" && *code != 0 && out.contains("removed from the lineup")
        })
        .map(|(_, _, o)| o)
        .collect();
    assert!(
        !refused_late.is_empty(),
        "no send to helper was refused after the removal"
    );
    wait_until(WAIT, "every queue empty", || {
        ["worker", "helper"].iter().all(|r| {
            count(&hq(&wt(&d, r), "inbox/new")) == 0
                && count(&hq(&wt(&d, r), "inbox/in_process")) == 0
                && handoff_names(&hq(&wt(&d, r), "outbox")).is_empty()
        }) && handoff_names(&hq(&lead_box(&d), "outbox")).is_empty()
    });
    // Exactly once, by the audit: every handoff lead queued reached its
    // recipient once and is closed, helper's too.
    let r = d.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let accepted_helper = sent
        .iter()
        .filter(|(to, code, _)| to == "helper" && *code == 0)
        .count();
    // A send checked just before helper was marked leaving is refused by
    // the daemon to lead's failed/, with the reason (docs/lineups.md).
    let refused_at_delivery = walk(&hq(&lead_box(&d), "failed"))
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "error"))
        .filter(|p| {
            fs::read_to_string(p)
                .is_ok_and(|t| t.contains("role helper is being removed from the lineup"))
        })
        .count();
    assert_eq!(
        files(&hq(&wt(&d, "helper"), "inbox/completed")).len() + refused_at_delivery,
        accepted_helper,
        "every handoff accepted for helper is closed in its inbox, or refused with the reason"
    );
    // The lineup outlives the swarm: down, up, still without helper, and
    // swarm.yaml as the person wrote it.
    let yaml = d.read("swarm.yaml");
    d.swarm(&["down"]).ok();
    d.swarm(&["up", "--no-tmux", "--detach"]).ok();
    assert_eq!(roles_tsv_names(&d), ["lead", "worker"]);
    assert_eq!(d.read("swarm.yaml"), yaml);
    d.swarm(&["down"]).ok();
    guard.running = None;
}

#[test]
fn definitions_come_from_swarm_yaml_and_the_users_folder() {
    let d = project("");
    let home = tempfile::tempdir().unwrap();
    let defs = home.path().join("swarm-handoff/agents");
    fs::create_dir_all(&defs).unwrap();
    fs::write(
        defs.join("checker.yaml"),
        format!("agent: {DRAIN_AGENT}\ndescription: checks what lands\n"),
    )
    .unwrap();
    let xdg = |args: &[&str]| {
        d.cmd("swarm")
            .env("XDG_CONFIG_HOME", home.path())
            .args(args)
            .run()
    };
    d.swarm(&["init"]).ok();
    let r = xdg(&["agents"]);
    r.ok();
    r.stdout_has("drainer  agent: sh");
    r.stdout_has("checks what lands");
    r.stdout_has(&defs.join("checker.yaml").display().to_string());
    let r = xdg(&["role", "add", "rev", "--from", "checker"]);
    r.ok();
    assert_eq!(roles_tsv_names(&d), ["lead", "worker", "rev"]);
    let r = xdg(&["role", "list", "--json"]);
    r.ok();
    let v = r.json();
    let rev = v["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "rev")
        .unwrap()
        .clone();
    assert_eq!(rev["from"], "checker");
    assert_eq!(rev["source"], "swarm role add");
    assert_eq!(rev["agent"], DRAIN_AGENT);
    // swarm.yaml's `from:` took the definition's agent.
    let worker = v["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "worker")
        .unwrap()
        .clone();
    assert_eq!(worker["agent"], DRAIN_AGENT);
    // Unknown: every place searched is named.
    let r = xdg(&["role", "add", "x", "--from", "ghost"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.stderr_has("unknown agent definition 'ghost'");
    r.stderr_has(&defs.display().to_string());
    let r = d.swarm(&["role", "add", "x", "--from", "checker"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.stderr_has("no user folder");
    // A role in swarm.yaml from an unknown definition: refused where read.
    let yaml = d.read("swarm.yaml");
    d.write(
        "swarm.yaml",
        &format!("{yaml}  - name: bad\n    from: ghost\n    worktree: bad\n"),
    );
    let r = d.swarm(&["role", "list"]);
    assert_eq!(r.code, 1);
    r.stderr_has("role 'bad': unknown agent definition 'ghost'");
}

#[test]
fn bad_lineup_changes_are_refused_with_the_reason() {
    let d = project("");
    d.swarm(&["init"]).ok();
    let yaml = d.read("swarm.yaml");
    let cases: [(&[&str], i32, &str); 10] = [
        (
            &["add", "x", "--agent", "no-such-agent-cli --yes"],
            1,
            "'no-such-agent-cli' is required but not installed",
        ),
        (
            &["add", "a_b", "--agent", "true"],
            1,
            "invalid role name 'a_b'",
        ),
        (&["add", "all", "--agent", "true"], 1, "is reserved"),
        (
            &["add", "x", "--agent", "true", "--worktree", "../out"],
            1,
            "invalid worktree '../out'",
        ),
        (
            &["add", "x", "--agent", "true", "--worktree", "worker"],
            1,
            "already used by role 'worker'",
        ),
        (
            &["add", "x"],
            1,
            "give --from <definition> or --agent <command>",
        ),
        (
            &["add", "worker", "--agent", "true"],
            2,
            "LINEUP_REFUSED: role worker is already in the lineup",
        ),
        (&["remove", "lead"], 2, "role lead is a person's"),
        (
            &["remove", "worker"],
            2,
            "role worker is the last agent role",
        ),
        (&["remove", "nobody"], 1, "unknown role nobody"),
    ];
    for (args, code, why) in cases {
        let r = d.cmd("swarm").arg("role").args(args.iter().copied()).run();
        assert_eq!(r.code, code, "{args:?}: {}", r.stderr);
        r.stderr_has(why);
    }
    // Nothing of that changed the lineup or the person's file.
    assert_eq!(roles_tsv_names(&d), ["lead", "worker"]);
    assert_eq!(d.read("swarm.yaml"), yaml);
    assert!(!d.path(".swarmforge/lineup.json").exists());
}

#[test]
fn concurrent_adds_are_serialised() {
    let d = project("");
    d.swarm(&["init"]).ok();
    let kids: Vec<_> = ["one", "two", "three"]
        .iter()
        .map(|n| {
            d.cmd("swarm")
                .args(["role", "add", n, "--from", "drainer"])
                .spawn()
        })
        .collect();
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    let mut names = roles_tsv_names(&d);
    names.sort();
    assert_eq!(names, ["lead", "one", "three", "two", "worker"]);
    for n in ["one", "two", "three"] {
        assert!(hq(&wt(&d, n), "inbox/new").is_dir(), "{n}'s folders");
    }
}

#[test]
fn with_tmux_an_added_role_gets_a_session_and_a_removed_one_loses_it() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let d = project("");
    let mut guard = SwarmGuard::new(&d.root);
    d.swarm(&["up", "--detach"]).ok();
    let sock = PathBuf::from(d.read(".swarmforge/tmux-socket").trim());
    guard.socket = Some(sock.clone());
    let has = |s: &str| {
        clean_command(Path::new("tmux"), &d.root)
            .arg("-S")
            .arg(&sock)
            .args(["has-session", "-t", &format!("={s}")])
            .status()
            .is_ok_and(|st| st.success())
    };
    d.swarm(&["role", "add", "helper", "--from", "drainer"])
        .ok();
    assert!(has("swarmforge-helper"));
    for n in 0..3 {
        d.send("lead", &note("helper", n)).ok();
    }
    wait_until(WAIT, "helper works its mail through tmux wake-ups", || {
        count(&hq(&wt(&d, "helper"), "inbox/completed")) == 3
    });
    d.swarm(&["role", "remove", "helper"]).ok();
    assert!(!has("swarmforge-helper"));
    assert!(has("swarmforge-worker"));
    d.swarm(&["audit", "--check"]).ok();
}

/// Writes `draft` in `role`'s worktree and sends it from there.
fn send_from(d: &Project, role: &str, draft: &str) -> Run {
    let path = wt(d, role).join("seat-draft.txt");
    fs::write(&path, draft).unwrap();
    d.cmd("swarm-handoff")
        .role(role)
        .at(wt(d, role))
        .arg(&path)
        .run()
}

fn seat(action: &str, role: &str) -> String {
    format!("type: seat_request\nto: lead\npriority: 50\nseat: {action}\nseat_role: {role}\ndefinition: drainer\nreason: more hands\n")
}

/// The answers in coord's inbox: (message, in_reply_to).
fn seat_answers(d: &Project) -> Vec<(String, String)> {
    walk(&hq(&wt(d, "coord"), "inbox"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "handoff"))
        .filter(|p| file_header(p, "from").as_deref() == Some("handoffd"))
        .filter_map(|p| Some((file_header(&p, "message")?, file_header(&p, "in_reply_to")?)))
        .collect()
}

fn coordinated() -> Project {
    project(&format!(
        "  - name: coord\n    agent: {DRAIN_AGENT}\n    worktree: coord\nlineup:\n  may_change: [coord]\n"
    ))
}

/// docs/lineups.md: a delivered request is carried out and answered
/// exactly once, whatever is killed when. Here the daemon is SIGKILLed
/// while `swarm role add` runs (held on the lineup lock by the test): the
/// restarted daemon waits for that command, finds the role added, and
/// answers once; it does not run the command again.
#[test]
fn a_seat_request_is_answered_once_when_the_daemon_is_killed_while_it_runs() {
    let d = coordinated();
    d.swarm(&["init"]).ok();
    let seats = d.path(".swarmforge/daemon/seats");
    // Holds the lineup lock: the daemon's `swarm role add` waits on it.
    let mut holder = std::process::Command::new("flock")
        .arg("--no-fork") // one process holds it: killing it frees the lock
        .arg(d.path(".swarmforge/lineup.lock"))
        .args(["sleep", "600"])
        .spawn()
        .expect("flock (util-linux) must be installed");
    let daemon = d.spawn_daemon(&[]);
    send_from(&d, "coord", &seat("add", "helper")).ok();
    let started = || {
        fs::read_dir(&seats)
            .map(|r| {
                r.flatten()
                    .any(|e| e.file_name().to_string_lossy().ends_with(".started"))
            })
            .unwrap_or(false)
    };
    wait_until(WAIT, "the command runs", started);
    // This project's own command (its folder: other tests add a helper too).
    let root = d.root.canonicalize().unwrap();
    wait_until(WAIT, "`swarm role add` waits on the lock", || {
        fs::read_dir("/proc").unwrap().flatten().any(|e| {
            let needle = b"role\0add\0helper";
            fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle))
                && fs::read_link(e.path().join("cwd")).is_ok_and(|c| c == root)
        })
    });
    drop(daemon); // SIGKILL; its `swarm role add` still waits on the lock
    let _daemon = d.spawn_daemon(&[]);
    let _ = holder.kill();
    let _ = holder.wait();
    wait_until(WAIT, "coord is told", || !seat_answers(&d).is_empty());
    wait_until(WAIT, "the request is retired", || {
        fs::read_dir(seats.join("done"))
            .map(|r| r.count())
            .unwrap_or(0)
            == 1
            && !started()
    });
    let answers = seat_answers(&d);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(
        answers[0]
            .0
            .contains("swarm role add helper --from drainer: done (before the daemon restarted)"),
        "{answers:?}"
    );
    assert_eq!(roles_tsv_names(&d), ["lead", "worker", "coord", "helper"]);
    let outcomes: Vec<_> = d
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "seat_requested")
        .collect();
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    let added = d
        .events()
        .iter()
        .filter(|e| e["kind"] == "seat_added")
        .count();
    assert_eq!(added, 1);
    d.swarm(&["audit", "--check"]).ok();
}

#[test]
fn a_coordinator_gets_seats_by_message_and_no_one_else_does() {
    let d = coordinated();
    d.swarm(&["init"]).ok();
    let _daemon = d.spawn_daemon(&[]);
    let seat_events = |d: &Project| -> Vec<String> {
        d.events()
            .iter()
            .filter(|e| e["kind"] == "seat_requested")
            .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    send_from(&d, "coord", &seat("add", "helper")).ok();
    wait_until(WAIT, "the daemon carried the request out", || {
        !seat_events(&d).is_empty()
    });
    let ev = seat_events(&d);
    assert!(
        ev[0].starts_with("swarm role add helper --from drainer: done"),
        "{ev:?}"
    );
    assert_eq!(roles_tsv_names(&d), ["lead", "worker", "coord", "helper"]);
    assert!(hq(&wt(&d, "helper"), "inbox/new").is_dir());
    // The requester is told, in a note from handoffd answering its request.
    wait_until(WAIT, "coord is told", || seat_answers(&d).len() == 1);
    let (answer, _) = &seat_answers(&d)[0];
    assert!(
        answer.contains("swarm role add helper --from drainer: done"),
        "{answer}"
    );
    // The request reached its recipient too, like any message.
    wait_until(WAIT, "lead has the request", || {
        walk(&lead_box(&d))
            .iter()
            .any(|p| file_header(p, "type").as_deref() == Some("seat_request"))
    });
    // A role lineup.may_change does not name: refused by its own check…
    let r = send_from(&d, "worker", &seat("remove", "coord"));
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    r.stderr_has("got 'seat_request'");
    // …and by the daemon for a file written past that check.
    let n = crate::support::note("worker", 5, "lead", "x");
    let text = n.text.replace(
        "type: note\nmessage: x\n",
        "type: seat_request\nseat: remove\nseat_role: coord\n",
    );
    drop_in_outbox(&wt(&d, "worker"), &n.name, text.as_bytes());
    let refusal = hq(&wt(&d, "worker"), "failed").join(format!("{}.error", n.name));
    wait_until(WAIT, "the worker's request is refused", || refusal.exists());
    let why = fs::read_to_string(&refusal).unwrap();
    assert!(
        why.contains("role worker may not change the lineup"),
        "{why}"
    );
    assert!(d
        .events()
        .iter()
        .any(|e| e["kind"] == "failed" && e["id"] == n.id.as_str()));
    assert!(roles_tsv_names(&d).contains(&"coord".to_string()));
    // Refused by `swarm role` itself: journaled with its reason.
    send_from(&d, "coord", &seat("remove", "lead")).ok();
    wait_until(WAIT, "the second request is journaled", || {
        seat_events(&d).len() == 2
    });
    let ev = seat_events(&d);
    assert!(
        ev[1].contains("refused (exit 2)") && ev[1].contains("is a person's"),
        "{ev:?}"
    );
    send_from(&d, "coord", &seat("remove", "helper")).ok();
    wait_until(WAIT, "helper left", || seat_events(&d).len() == 3);
    assert!(seat_events(&d)[2].contains("done"), "{:?}", seat_events(&d));
    assert_eq!(roles_tsv_names(&d), ["lead", "worker", "coord"]);
    d.swarm(&["audit", "--check"]).ok();
}

/// A handoffd killed after it published a copy and before it moved the
/// original leaves both; when the role then starts leaving, the next
/// daemon finishes that delivery (the copy is out: refusing it now would
/// tell the sender "failed" while the recipient holds it) and the removal
/// returns it once. Failed before, when CI's load placed the kill there:
/// `failed` to the sender, the copy returned too, and `audit --check`
/// naming the copy as never moved.
#[test]
fn a_delivery_a_killed_daemon_began_is_finished_when_its_recipient_leaves() {
    let d = project(&format!(
        "  - name: spare\n    agent: {DRAIN_AGENT}\n    worktree: spare\n"
    ));
    d.swarm(&["init"]).ok();
    d.send("lead", &note("spare", 0)).ok();
    // What the killed daemon left: the original in the outbox, and its
    // copy, stamped, in the recipient's inbox.
    let outbox = hq(&lead_box(&d), "outbox");
    let original = fs::read_dir(&outbox)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "handoff"))
        .unwrap();
    let name = original.file_name().unwrap().to_owned();
    let text = fs::read_to_string(&original).unwrap();
    let (head, body) = text.split_once("\n\n").unwrap();
    let at = header(&text, "created_at").unwrap();
    let copy = format!("{head}\nrecipient: spare\nenqueued_at: {at}\n\n{body}");
    let new = hq(&wt(&d, "spare"), "inbox/new");
    fs::create_dir_all(&new).unwrap();
    fs::write(new.join(&name), copy).unwrap();
    // And the removal had begun (it was killed too): spare is leaving.
    d.write(
        ".swarmforge/lineup.json",
        "{\"generation\": 1, \"leaving\": [\"spare\"]}\n",
    );
    let daemon = d.spawn_daemon(&[]);
    wait_until(WAIT, "the outbox is taken", || count(&outbox) == 1);
    assert_eq!(count(&hq(&lead_box(&d), "failed")), 0, "refused");
    assert!(hq(&lead_box(&d), "sent").join(&name).exists());

    let r = d.swarm(&["role", "remove", "spare"]);
    drop(daemon);
    r.ok();
    r.stdout_has("ROLE REMOVED: spare (1 waiting item(s) returned");
    assert_eq!(returned_to_lead(&d).len(), 1);
    let id = header(&text, "id").unwrap();
    let delivered = d
        .events()
        .iter()
        .filter(|e| e["kind"] == "delivered" && e["id"] == id)
        .count();
    assert_eq!(delivered, 1);
    d.swarm(&["audit", "--check"]).ok();
}

#[test]
fn without_a_running_daemon_a_removal_still_returns_the_mail() {
    let d = project(&format!(
        "  - name: spare\n    agent: {DRAIN_AGENT}\n    worktree: spare\n"
    ));
    d.swarm(&["init"]).ok();
    {
        let _daemon = d.spawn_daemon(&[]);
        for n in 0..2 {
            d.send("lead", &note("spare", n)).ok();
        }
        let new = hq(&wt(&d, "spare"), "inbox/new");
        wait_until(WAIT, "two items wait for spare", || count(&new) == 2);
    }
    let r = d.swarm(&["role", "remove", "spare"]);
    r.ok();
    r.stdout_has("ROLE REMOVED: spare (2 waiting item(s) returned");
    r.stderr_has("to deliver the returned mail");
    // Delivered before the command returned, and that daemon is gone again.
    assert_eq!(returned_to_lead(&d).len(), 2);
    let log = d.log();
    let last_start = log.rfind(" started").unwrap();
    assert!(log[last_start..].contains(" stopped\n"), "{log}");
    d.swarm(&["audit", "--check"]).ok();
}
