//! A person's mail is theirs: a human role's own inbox, `swarm inbox`, the
//! one clarify story, ids and prefixes, and `swarm doctor`
//! (docs/message-model.md "Human roles", docs/doctor.md).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::*;

/// `lead` (a scripted agent) and `boss` (a person), both at the default
/// worktree, laid out by `swarm init`.
fn lead_and_boss(lead_agent: &str, extra: &str) -> Project {
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        &format!(
            "roles:\n  - name: lead\n    agent: {lead_agent}\n{extra}  - name: boss\n    agent: human\n"
        ),
    );
    p.swarm(&["init"]).ok();
    p
}

fn boss_inbox(p: &Project, rel: &str) -> PathBuf {
    p.path(".swarmforge/people/boss/.swarmforge/handoffs/inbox")
        .join(rel)
}

fn id_of(path: &Path) -> String {
    let n = path.file_name().unwrap().to_string_lossy().into_owned();
    let rest = n.split_once('_').unwrap().1;
    rest.split("_to_").next().unwrap().to_string()
}

/// The exact walkthrough: the lead asks boss a clarify and sends it notes,
/// then drains its own queue until NO_TASK. The person's mail is still
/// waiting for the person afterwards; `--until-idle` says so and exits 3;
/// receipts do not claim boss handled anything.
#[test]
fn walkthrough_the_leads_queue_never_takes_the_persons_mail() {
    let p = lead_and_boss("sh \"$SWARMFORGE_PROJECT/lead.sh\"", "");
    p.write(
        "lead.sh",
        "set -eu\nd=lead-draft.txt\n\
         if [ ! -e .asked ]; then\n\
         printf 'type: clarify\\nto: boss\\npriority: 10\\nquestion: Ship on Friday?\\n\\nYes\\nNo\\n' >\"$d\"; swarm-handoff \"$d\"\n\
         printf 'type: note\\nto: boss\\npriority: 20\\nmessage: build is green\\n' >\"$d\"; swarm-handoff \"$d\"\n\
         printf 'type: note\\nto: boss\\npriority: 30\\nmessage: release notes drafted\\n' >\"$d\"; swarm-handoff \"$d\"\n\
         : >.asked\nfi\n\
         out=$(ready-next)\nuntil printf '%s\\n' \"$out\" | grep -qx NO_TASK; do out=$(done-current); done\n",
    );
    let mut guard = SwarmGuard::new(&p.root);
    guard.guard(
        p.cmd("swarm")
            .args(["up", "--no-tmux", "--until-idle", "--timeout", "60s"])
            .start(),
    );
    let up = guard.finish(Duration::from_secs(90), "swarm up --until-idle returns");
    // The lead drained its queue without completing a single item of boss's.
    let taken = handoff_names(&p.path(".swarmforge/handoffs/inbox/completed"));
    assert!(
        taken.is_empty(),
        "the lead took the person's mail: {taken:?}"
    );
    assert_eq!(up.code, 3, "{up:?}");
    up.stderr_has("swarm up: idle, but 3 item(s) wait for a person:");
    up.stderr_has("  -> swarm answer ");
    up.stderr_has(" --role boss");
    // Still waiting for boss, in boss's own inbox; nothing completed.
    let waiting = handoff_names(&boss_inbox(&p, "new"));
    assert_eq!(waiting.len(), 3, "{waiting:?}");
    assert!(handoff_names(&boss_inbox(&p, "completed")).is_empty());
    let inbox = p.swarm(&["inbox", "--json"]).ok().json();
    let items = inbox["items"].as_array().unwrap();
    let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["clarify", "note", "note"], "{inbox}");
    for i in items {
        assert_eq!(i["role"], "boss");
        assert_eq!(i["from"], "lead");
        assert_eq!(i["state"], "new");
    }
    let note = items[1]["id"].as_str().unwrap().to_string();
    let r = p.swarm(&["receipts", &note]).ok().stdout.clone();
    assert!(r.contains("boss       new "), "{r}");
    p.swarm(&["audit", "--check"]).ok();
    // The person handles it: the note marked done, the clarify answered.
    let done = p.swarm(&["inbox", "done", &note]);
    done.ok().stdout_has("COMPLETED: ");
    let r = p.swarm(&["receipts", &note]).ok().stdout.clone();
    assert!(r.contains("boss       completed "), "{r}");
    let clarify = items[0]["id"].as_str().unwrap().to_string();
    p.swarm(&["answer", &clarify, "--choice", "1"]).ok();
    p.swarm(&["audit", "--check"]).ok();
}

/// A layout that names a human role and an agent role in one worktree is
/// refused, naming both and the fix: swarm.yaml (at the key), a
/// hand-written roles.tsv (handoffd) and SwarmForge's conf (migration).
#[test]
fn shared_human_and_agent_worktrees_are_refused() {
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        "roles:\n  - name: lead\n    agent: sh x.sh\n  - name: boss\n    agent: human\n    worktree: master\n",
    );
    let r = p.swarm(&["init"]);
    assert_eq!(r.code, 1, "{r:?}");
    r.stderr_has("swarm.yaml:6:")
        .stderr_has("roles boss (human) and lead (agent) share the worktree")
        .stderr_has("remove `worktree:` from role boss");
    assert!(!p.path(".swarmforge/roles.tsv").exists(), "nothing written");
    let r = p.cmd("swarm").args(["up", "--no-tmux"]).run();
    assert_eq!(r.code, 1, "{r:?}");
    r.stderr_has("roles boss (human) and lead (agent)");

    // A table written by hand (or by SwarmForge's launcher).
    let t = Project::with_roles(&[
        ("lead", "master", "codex", "task"),
        ("boss", "master", "human", "task"),
    ]);
    let r = t.deliver_once();
    assert_eq!(r.code, 1, "{r:?}");
    r.stderr_has("roles boss (human) and lead (agent) share the worktree")
        .stderr_has(".swarmforge/people/boss")
        .stderr_has("SwarmForge project");

    // SwarmForge's conf: the same refusal with the migration hint.
    let c = Project::empty();
    c.write("swarmforge/constitution.prompt", "be good\n");
    c.write("swarmforge/roles/lead.prompt", "lead\n");
    c.write("swarmforge/roles/boss.prompt", "boss\n");
    c.write(
        "swarmforge/swarmforge.conf",
        "window lead claude master\nwindow boss human master\n",
    );
    let r = c.swarm(&["init"]);
    assert_eq!(r.code, 1, "{r:?}");
    r.stderr_has("swarmforge.conf: roles boss (human) and lead (agent)")
        .stderr_has("window boss human boss")
        .stderr_has("swarm doctor");
}

/// `swarm inbox`: list (oldest first), show, done; a corrupt file is shown
/// with its path and blocks nothing; unknown, ambiguous, foreign and clarify
/// ids are refused with exit 2 and change nothing.
#[test]
fn inbox_lists_shows_and_marks_done_and_refuses_bad_ids() {
    let p = lead_and_boss("sh x.sh", "");
    let ask = p
        .send(
            "lead",
            "type: clarify\nto: boss\npriority: 10\nquestion: Which way?\n\nLeft\nRight\n",
        )
        .queued();
    let n1 = p
        .send(
            "lead",
            "type: note\nto: boss\npriority: 20\nmessage: first\n",
        )
        .queued();
    let n2 = p
        .send(
            "lead",
            "type: note\nto: boss\npriority: 20\nmessage: second\n",
        )
        .queued();
    // Mail for the lead: a person sends from the project root too.
    let to_lead = p
        .send(
            "boss",
            "type: note\nto: lead\npriority: 20\nmessage: hi lead\n",
        )
        .queued();
    assert!(
        to_lead.starts_with(p.path(".swarmforge/people/boss")),
        "{to_lead:?}"
    );
    p.deliver_once().ok();
    let corrupt = boss_inbox(
        &p,
        "new/50_20261201T000000Z_000001_from_lead_to_boss.handoff",
    );
    fs::write(&corrupt, "not a header\n").unwrap();

    let l = p.swarm(&["inbox"]);
    l.ok();
    let lines: Vec<&str> = l.stdout.lines().collect();
    assert!(lines[0].starts_with("ID "), "{}", l.stdout);
    assert!(lines[1].starts_with(&id_of(&ask)) && lines[1].contains("Which way?"));
    assert_eq!(
        lines[2],
        format!("  -> swarm answer {} --choice N | --text T", id_of(&ask))
    );
    assert!(lines[3].starts_with(&id_of(&n1)) && lines[3].ends_with("first"));
    assert_eq!(
        lines[4],
        format!("  -> swarm inbox done {} --role boss", id_of(&n1))
    );
    assert!(lines[5].starts_with(&id_of(&n2)));
    l.stdout_has(&format!("unreadable (for boss): {}: ", corrupt.display()));
    let lead = p.swarm(&["inbox", "--role", "lead", "--json"]).ok().json();
    assert_eq!(lead["items"][0]["id"], id_of(&to_lead).as_str());

    let show = p.swarm(&["inbox", "show", &id_of(&n2)]);
    show.ok()
        .stdout_has(&format!("ID: {}\nFOR: boss\n", id_of(&n2)))
        .stdout_has("message: second\n");

    let before = snapshot(&p.root);
    for (id, token) in [
        ("nope".to_string(), "UNKNOWN_ID: "),
        (id_of(&n1)[..10].to_string(), "AMBIGUOUS_ID: "),
        (id_of(&to_lead), "NOT_WAITING_FOR_ROLE: "),
        (id_of(&ask), "CLARIFY_NEEDS_ANSWER: "),
    ] {
        let r = p.swarm(&["inbox", "done", &id]);
        assert_eq!(r.code, 2, "{id}: {r:?}");
        assert!(r.stderr.starts_with(token), "{id}: {}", r.stderr);
        assert_eq!(snapshot(&p.root), before, "{id} changed nothing");
    }
    let r = p.swarm(&["inbox", "done", &id_of(&n1), "--json"]);
    let v = r.ok().json();
    assert_eq!(v["status"], "completed");
    let done = PathBuf::from(v["completed"].as_str().unwrap());
    assert_eq!(
        done,
        boss_inbox(&p, "completed").join(n1.file_name().unwrap())
    );
    assert!(file_header(&done, "completed_at").is_some());
    assert!(file_header(&done, "dequeued_at").is_some());
    let again = p.swarm(&["inbox", "done", &id_of(&n1)]);
    assert_eq!(again.code, 2, "{again:?}");
    // The corrupt file is the audit's to report, not the inbox's to hide.
    let audit = p.swarm(&["audit", "--check"]);
    assert_eq!(audit.code, 2);
    audit.stdout_has(&format!("VIOLATION malformed {}", corrupt.display()));
    fs::remove_file(&corrupt).unwrap();
    p.swarm(&["audit", "--check"]).ok();
    // status names the command for what still waits.
    let st = p.swarm(&["status"]);
    st.ok()
        .stdout_has(&format!("  -> swarm inbox done {} --role boss", id_of(&n2)))
        .stdout_has(&format!("  -> swarm answer {} --choice N", id_of(&ask)));
}

/// `swarm transcript --ids` shows ids; receipts, --thread and answer take a
/// unique prefix; an ambiguous one is refused with the candidates.
#[test]
fn ids_in_the_transcript_and_unique_prefixes_everywhere() {
    let p = lead_and_boss("sh x.sh", "");
    let ask = p
        .send(
            "lead",
            "type: clarify\nto: boss\npriority: 10\nquestion: Which way?\n\nLeft\nRight\n",
        )
        .queued();
    let note = p
        .send("lead", "type: note\nto: boss\npriority: 20\nmessage: fyi\n")
        .queued();
    p.deliver_once().ok();
    let (a, n) = (id_of(&ask), id_of(&note));
    let t = p.swarm(&["transcript", "--ids"]);
    t.ok()
        .stdout_has(&format!("] {a} [lead -> boss] clarify Which way?"))
        .stdout_has(&format!("] {n} [lead -> boss] note fyi"));
    assert!(!p.swarm(&["transcript"]).stdout.contains(&a));
    // Both ids share a prefix (up to the sequence number when both were
    // sent in the same second; less when a second ended in between).
    let same = a.bytes().zip(n.bytes()).take_while(|(x, y)| x == y).count();
    let common = &a[..same];
    let r = p.swarm(&["receipts", common]);
    assert_eq!(r.code, 2, "{r:?}");
    r.stderr_has("AMBIGUOUS_ID: ").stderr_has(&a).stderr_has(&n);
    let short_n = &n[..n.find("_from_").unwrap()];
    p.swarm(&["receipts", short_n])
        .ok()
        .stdout_has(&format!("id: {n}"));
    p.swarm(&["transcript", "--thread", short_n])
        .ok()
        .stdout_has("note fyi");
    let short_a = &a[..a.find("_from_").unwrap()];
    p.swarm(&["answer", short_a, "--choice", "2"])
        .ok()
        .stdout_has("HANDOFF QUEUED: ");
    let r = p.swarm(&["receipts", "29990101"]);
    assert_eq!(r.code, 1, "{r:?}");
    r.stderr_has("'29990101' is not a message id, nor the start of one in ");
}

/// The lines of the primer's "Asking a person" section.
fn asking_steps(primer: &str) -> Vec<String> {
    primer
        .split("## Asking a person\n")
        .nth(1)
        .expect("an Asking a person section")
        .split("\n## ")
        .next()
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

/// Follows the primer's own words, step by step, with the commands it
/// names (the SwarmForge wrappers an agent has on PATH), and ends with the
/// answer in front of the agent together with the item it asked about.
#[test]
fn the_primers_clarify_story_works_step_by_step() {
    let p = lead_and_boss("sh x.sh", "");
    let primer = p.swarm(&["prompt", "lead"]).ok().stdout.clone();
    let steps = asking_steps(&primer);
    assert_eq!(steps.len(), 5, "{primer}");
    let shims = p.path("shims");
    fs::create_dir_all(&shims).unwrap();
    p.swarm(&["shims", shims.to_str().unwrap()]).ok();
    let path = format!(
        "{}:{}:{}",
        shims.display(),
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let sh = |role: &str, cmd: &str| {
        p.cmd("sh")
            .args(["-c", cmd])
            .env("PATH", &path)
            .role(role)
            .run()
    };
    // An item to work on, from the person.
    p.send(
        "boss",
        "type: note\nto: lead\npriority: 20\nmessage: plan the release\n",
    )
    .queued();
    p.deliver_once().ok();
    let took = sh("lead", "ready_for_next.sh");
    let task = took.ok().stdout.lines().next().unwrap().to_string();
    assert!(task.starts_with("TASK: "), "{}", took.stdout);

    // 1. Send a clarify to boss.
    assert!(
        steps[0].starts_with("1. Send a `clarify` to `boss`"),
        "{}",
        steps[0]
    );
    p.write(
        "ask.txt",
        "type: clarify\nto: boss\npriority: 10\nquestion: Which day?\n\nFriday\nMonday\n",
    );
    let asked = sh("lead", "swarm_handoff.sh ask.txt").queued();
    // 2. Do not run done_with_current.sh: the item stays in process.
    assert!(
        steps[1].contains("Do not run `done_with_current.sh`")
            && steps[1].contains("in process (parked)"),
        "{}",
        steps[1]
    );
    let parked = PathBuf::from(task.strip_prefix("TASK: ").unwrap());
    assert!(parked.exists());
    // 3. End your turn.
    assert_eq!(steps[2], "3. End your turn.");
    p.deliver_once().ok();
    p.swarm(&[
        "answer",
        &id_of(&asked),
        "--choice",
        "2",
        "--text",
        "after the freeze",
    ])
    .ok();
    p.deliver_once().ok();
    // 4. When woken, ready_for_next.sh prints the same item with ANSWER:.
    assert!(
        steps[3].contains("run `ready_for_next.sh`")
            && steps[3].contains("the same item again with an `ANSWER:` block"),
        "{}",
        steps[3]
    );
    let back = sh("lead", "ready_for_next.sh");
    back.ok()
        .stdout_has(&format!("{task}\n"))
        .stdout_has("ANSWER_CHOICE: 2. Monday\n")
        .stdout_has("ANSWER_TEXT: after the freeze\n")
        .stdout_has("plan the release");
    // 5. Finish the item, then done_with_current.sh.
    assert!(
        steps[4].contains("then run `done_with_current.sh`"),
        "{}",
        steps[4]
    );
    sh("lead", "done_with_current.sh")
        .ok()
        .stdout_has("COMPLETED: ")
        .stdout_has("NO_TASK");
    p.swarm(&["audit", "--check"]).ok();
}

/// A person's prompt says what a person does; an agent's drafts address the
/// peers its job names.
#[test]
fn a_persons_prompt_and_drafts_addressed_to_the_peers_the_job_names() {
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        "roles:\n  - name: coder\n    agent: sh x.sh\n    worktree: coder\n\
         \x20 - name: lead\n    agent: sh x.sh\n    prompt: Plan the work; hand reviewed plans to `qa` and ask `owner` when unsure.\n\
         \x20 - name: qa\n    agent: sh x.sh\n    worktree: qa\n\
         \x20 - name: boss\n    agent: human\n  - name: owner\n    agent: human\n",
    );
    p.swarm(&["init"]).ok();
    let boss = p.swarm(&["prompt", "boss"]).ok().stdout.clone();
    for want in [
        "swarm inbox",
        "swarm answer <id>",
        "swarm inbox done <id>",
        "You are the person",
    ] {
        assert!(boss.contains(want), "{want}: {boss}");
    }
    for never in [
        "ready_for_next.sh",
        "commit code with git",
        "done_with_current.sh",
    ] {
        assert!(!boss.contains(never), "{never}: {boss}");
    }
    let lead = p.swarm(&["prompt", "lead"]).ok().stdout.clone();
    assert!(lead.contains("type: note\nto: qa\n"), "{lead}");
    assert!(lead.contains("type: clarify\nto: owner\n"), "{lead}");
    assert!(
        lead.contains("send a `clarify` to `owner`")
            || lead.contains("Send a `clarify` to `owner`"),
        "{lead}"
    );
}

/// A person works in the project root while their mail lives in their own
/// folder: the draft they send from the root is theirs and is deleted, with
/// no warning.
#[test]
fn a_persons_draft_in_the_project_root_is_deleted_once_queued() {
    let p = lead_and_boss("sh x.sh", "");
    p.write(
        "boss-draft.txt",
        "type: note\nto: lead\npriority: 20\nmessage: go ahead\n",
    );
    let r = p.run(Some("boss"), "swarm-handoff", &["boss-draft.txt"]);
    r.ok();
    assert!(r.stdout.starts_with("HANDOFF QUEUED: "), "{}", r.stdout);
    assert!(
        r.stdout.contains(".swarmforge/people/boss/"),
        "queued in the person's own folder: {}",
        r.stdout
    );
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    assert!(!p.path("boss-draft.txt").exists(), "the draft was deleted");
}

/// The cockpit's "mark done" is `swarm inbox done` (same refusals).
#[test]
fn the_cockpit_marks_a_persons_item_done() {
    let p = lead_and_boss("sh x.sh", "");
    let n = p
        .send("lead", "type: note\nto: boss\npriority: 20\nmessage: fyi\n")
        .queued();
    p.deliver_once().ok();
    let s = crate::serve::start(&p);
    let prefix = &id_of(&n)[..22];
    let r = s.post(
        "/api/inbox/done",
        serde_json::json!({"id": prefix, "role": "boss"}),
    );
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "completed");
    assert_eq!(handoff_names(&boss_inbox(&p, "completed")).len(), 1);
    let r = s.post("/api/inbox/done", serde_json::json!({"id": id_of(&n)}));
    assert!(
        r.code >= 400 && r.body.contains("UNKNOWN_ID"),
        "{} {}",
        r.code,
        r.body
    );
}

/// Every finding of a `swarm doctor --json` report.
fn findings(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().clone())
        .collect()
}

/// `swarm doctor --json`: exit code, the finding codes, the report.
fn doctor(p: &Project) -> (i32, Vec<String>, serde_json::Value) {
    let r = p.swarm(&["doctor", "--json"]);
    let v = r.json();
    let codes = findings(&v)
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect();
    (r.code, codes, v)
}

/// Runs `program args` in a process group of its own until `code` shows
/// in doctor's report; kills the group; returns that finding.
fn with_process_until(p: &Project, program: &str, args: &[&str], code: &str) -> serde_json::Value {
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = child.id() as i32;
    let mut found = serde_json::Value::Null;
    wait_until(Duration::from_secs(20), code, || {
        let (_, _, v) = doctor(p);
        found = findings(&v)
            .into_iter()
            .find(|f| f["code"] == code)
            .unwrap_or_default();
        !found.is_null()
    });
    // SAFETY: kill(2) of the process group we started.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
    found
}

/// Healthy: a running daemon and nothing else wrong exits 0; every planted
/// problem then shows with its code and a fix.
#[test]
fn doctor_finds_each_planted_problem() {
    let p = lead_and_boss("sh x.sh", "");
    let (code, codes, _) = doctor(&p);
    assert_eq!(
        (code, codes.clone()),
        (1, vec!["DAEMON_NOT_RUNNING".to_string()])
    );
    let mut d = p.spawn_daemon(&[]);
    let (code, codes, v) = doctor(&p);
    assert_eq!((code, codes.len()), (0, 0), "{v}");
    assert_eq!(v["healthy"], true);
    p.swarm(&["doctor"]).ok().stdout_has("healthy: ");

    // Planted: mail for boss left in the lead's inbox (old layout), a
    // copy enqueued an hour before it was created, a corrupt file, a log
    // past its size, launcher state git does not ignore, an empty tmux socket pointer.
    let stray = "id: 20261201T110000Z_000001_from_lead\nfrom: lead\nto: boss\nrecipient: boss\npriority: 50\ntype: note\nmessage: left over\ncreated_at: 2026-12-01T11:00:00.000000Z\nenqueued_at: 2026-12-01T10:00:00.000000Z\n\nRe-read your role and constitution.\n\nleft over\n";
    let stray_path = p.write(
        ".swarmforge/handoffs/inbox/new/50_20261201T110000Z_000001_from_lead_to_boss.handoff",
        stray,
    );
    p.write(
        ".swarmforge/people/boss/.swarmforge/handoffs/inbox/new/50_x_to_boss.handoff",
        "junk\n",
    );
    p.write(
        "swarm.yaml",
        &format!("{}logs:\n  max_bytes: 1024\n", p.read("swarm.yaml")),
    );
    p.write(".swarmforge/agents/lead.log", &"x".repeat(4096));
    let exclude = p.path(".git/info/exclude");
    let ex = fs::read_to_string(&exclude)
        .unwrap()
        .replace(".swarmforge/\n", "");
    fs::write(&exclude, ex).unwrap();
    let tmux = require_tool("tmux", "apt-get install -y tmux");
    if tmux {
        p.write(".swarmforge/tmux-socket", "");
    }
    let (code, codes, v) = doctor(&p);
    assert_eq!(code, 1);
    let mut want = vec![
        "PERSON_MAIL_ELSEWHERE",
        "UNIGNORED_LAUNCH_FILE",
        "LOG_TOO_LARGE",
        "CLOCK_SKEW",
        "AUDIT_VIOLATION",
    ];
    if tmux {
        // An empty pointer names no socket (tests/cli/doctor.rs has the stale one).
        want.push("TMUX_SOCKET_POINTER");
    }
    for w in want {
        assert!(codes.iter().any(|c| c == w), "{w} missing in {v}");
    }
    let all = findings(&v);
    let elsewhere = all
        .iter()
        .find(|f| f["code"] == "PERSON_MAIL_ELSEWHERE")
        .unwrap();
    assert_eq!(elsewhere["path"], stray_path.to_str().unwrap());
    assert!(elsewhere["fix"]
        .as_str()
        .unwrap()
        .contains(".swarmforge/people/boss"));
    for f in &all {
        assert!(
            !f["message"].as_str().unwrap().is_empty() && !f["fix"].as_str().unwrap().is_empty(),
            "{f}"
        );
    }
    let text = p.swarm(&["doctor"]);
    assert_eq!(text.code, 1);
    text.stdout_has("FINDING  LOG_TOO_LARGE: ")
        .stdout_has("  fix: ");
    d.alive();
}

/// Every missing agent CLI at once, in doctor and in `swarm up`'s refusal;
/// a shared human inbox in a hand-written table; a daemon whose binary
/// was replaced since it started.
#[test]
fn doctor_names_missing_clis_shared_inboxes_and_a_stale_daemon() {
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        "roles:\n  - name: a\n    agent: nosuch-one-x1 --go\n    worktree: a\n  - name: b\n    agent: nosuch-two-x2\n    worktree: b\n  - name: c\n    agent: nosuch-one-x1\n    worktree: c\n",
    );
    p.swarm(&["init"]).ok();
    let (_, codes, v) = doctor(&p);
    assert_eq!(
        codes.iter().filter(|c| *c == "AGENT_CLI_MISSING").count(),
        2,
        "{v}"
    );
    let up = p.cmd("swarm").args(["up", "--no-tmux"]).run();
    assert_eq!(up.code, 1);
    up.stderr_has("'nosuch-one-x1' is required but not installed.")
        .stderr_has("'nosuch-two-x2' is required but not installed.")
        .stderr_has("roles a, c");

    let t = Project::with_roles(&[
        ("lead", "master", "codex", "task"),
        ("boss", "master", "human", "task"),
    ]);
    let (code, codes, v) = doctor(&t);
    assert_eq!(code, 1);
    assert!(codes.contains(&"SHARED_INBOX".to_string()), "{v}");

    // A daemon started from a binary that is then replaced.
    let h = lead_and_boss("sh x.sh", "");
    let copy = h.path("old-handoffd");
    fs::copy(bin("handoffd"), &copy).unwrap();
    let mut child = clean_command(&copy, &h.root)
        .arg(&h.root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(20), "the copied daemon runs", || {
        doctor(&h).1 != vec!["DAEMON_NOT_RUNNING".to_string()]
    });
    fs::remove_file(&copy).unwrap();
    let (_, codes, v) = doctor(&h);
    let _ = child.kill();
    let _ = child.wait();
    assert!(codes.contains(&"DAEMON_STALE_BINARY".to_string()), "{v}");
}

/// A project on a small file system (a real tmpfs): DISK_LOW with its fix.
#[test]
fn doctor_finds_a_disk_running_out_of_space() {
    let Some(fs_) = crate::faults::Tmpfs::mount("40m") else {
        return;
    };
    let root = fs_.path().join("proj");
    fs::create_dir_all(&root).unwrap();
    fs::write(
        root.join("swarm.yaml"),
        "roles:\n  - name: lead\n    agent: sh x.sh\n  - name: boss\n    agent: human\n",
    )
    .unwrap();
    let p = Project::empty();
    p.cmd("swarm").at(&root).arg("init").run().ok();
    let r = p.cmd("swarm").at(&root).args(["doctor", "--json"]).run();
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    let disk = findings(&v)
        .into_iter()
        .find(|f| f["code"] == "DISK_LOW")
        .unwrap_or_else(|| panic!("no DISK_LOW in {v}"));
    assert!(disk["fix"].as_str().unwrap().contains("free space"));
}

/// A project laid out before people had inboxes of their own (boss in the
/// main checkout beside the lead): `swarm init` gives boss its folder and
/// moves what waits only for boss there, before the lead can take it.
#[test]
fn init_moves_a_persons_waiting_mail_out_of_a_shared_inbox() {
    let p = lead_and_boss("sh x.sh", "");
    // The old table: boss in the main checkout, sharing the lead's inbox.
    let r = p.root.display().to_string();
    p.write_roles_raw(&format!(
        "lead\tmaster\t{r}\tswarmforge-lead\tLead\tsh\ttask\nboss\tmaster\t{r}\tswarmforge-boss\tBoss\thuman\ttask\n"
    ));
    let theirs = p.write(
        ".swarmforge/handoffs/inbox/new/20_20261201T100000Z_000001_from_lead_to_boss.handoff",
        "id: 20261201T100000Z_000001_from_lead\nfrom: lead\nto: boss\nrecipient: boss\npriority: 20\ntype: note\nmessage: for boss\ncreated_at: 2026-12-01T10:00:00.000000Z\nenqueued_at: 2026-12-01T10:00:00.100000Z\n\nRe-read your role and constitution.\n\nfor boss\n",
    );
    let both = p.write(
        ".swarmforge/handoffs/inbox/new/20_20261201T100000Z_000002_from_lead_to_lead_boss.handoff",
        "id: 20261201T100000Z_000002_from_lead\nfrom: lead\nto: lead,boss\npriority: 20\ntype: note\nmessage: for both\ncreated_at: 2026-12-01T10:00:00.000000Z\nenqueued_at: 2026-12-01T10:00:00.100000Z\n\nRe-read your role and constitution.\n\nfor both\n",
    );
    p.swarm(&["init"])
        .ok()
        .stdout_has("moved 1 item(s) waiting for boss");
    assert!(!theirs.exists() && both.exists());
    assert!(boss_inbox(&p, "new")
        .join(theirs.file_name().unwrap())
        .exists());
    p.cmd("ready-next")
        .role("lead")
        .run()
        .ok()
        .stdout_has("for both");
    let again = p.swarm(&["init"]);
    again.ok().stdout_has("is up to date");
}

/// Another program holding the daemon's lock is found by its version: the
/// process doctor finds there reports a version other than this swarm's.
#[test]
fn doctor_finds_a_daemon_of_another_version() {
    if !require_tool("flock", "apt-get install -y util-linux") {
        return;
    }
    let p = lead_and_boss("sh x.sh", "");
    let pid_file = p.path(".swarmforge/daemon/handoffd.pid");
    fs::create_dir_all(pid_file.parent().unwrap()).unwrap();
    fs::write(&pid_file, "").unwrap();
    let lock = pid_file.to_str().unwrap();
    let f = with_process_until(&p, "flock", &["-x", lock, "sleep", "120"], "DAEMON_VERSION");
    assert!(f["message"].as_str().unwrap().contains("flock"), "{f}");
    assert!(f["fix"].as_str().unwrap().contains("swarm stop"), "{f}");
}

/// A second process calling itself handoffd for the same project (beside
/// the one holding the lock) is DAEMON_MULTIPLE.
#[test]
fn doctor_finds_a_second_daemon_process() {
    let p = lead_and_boss("sh x.sh", "");
    let _d = p.spawn_daemon(&[]);
    let root = p.root.to_str().unwrap();
    let f = with_process_until(
        &p,
        "bash",
        &["-c", "exec -a handoffd tail -f /dev/null \"$0\"", root],
        "DAEMON_MULTIPLE",
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("2 handoffd processes"),
        "{f}"
    );
    let (code, codes, v) = doctor(&p);
    assert_eq!((code, codes.len()), (0, 0), "{v}");
}

/// Eight people marking the same item done at once (real processes): one
/// completes it, the others are refused, and it is completed exactly once.
#[test]
fn concurrent_inbox_done_completes_an_item_once() {
    let p = lead_and_boss("sh x.sh", "");
    let n = p
        .send(
            "lead",
            "type: note\nto: boss\npriority: 20\nmessage: once\n",
        )
        .queued();
    p.deliver_once().ok();
    let id = id_of(&n);
    let children: Vec<_> = (0..8)
        .map(|_| {
            p.cmd("swarm")
                .args(["inbox", "done", &id])
                .command()
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let codes: Vec<i32> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap().status.code().unwrap_or(-1))
        .collect();
    assert_eq!(codes.iter().filter(|c| **c == 0).count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 2).count(), 7, "{codes:?}");
    let done = handoff_names(&boss_inbox(&p, "completed"));
    assert_eq!(done.len(), 1, "{done:?}");
    assert!(handoff_names(&boss_inbox(&p, "new")).is_empty());
    let f = boss_inbox(&p, "completed").join(&done[0]);
    assert_eq!(header_count(&f, "completed_at"), 1);
    p.swarm(&["audit", "--check"]).ok();
}
