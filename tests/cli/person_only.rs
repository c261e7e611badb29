//! A person's items are the person's (issue 42.9, 43.6-7): every
//! person-only action asks who is calling the same way, by the caller's
//! ancestry (docs/security.md, "Who is calling"), and a scripted agent is
//! refused however it names itself.

use std::path::Path;

use crate::support::*;

/// The three ways an agent (`agent`, running with `SWARMFORGE_ROLE=agent`)
/// calls `swarm <args>`: as itself, claiming `claim` in its own shell, and
/// with the variable dropped (its shell's parents still name it).
fn as_agent_every_way(p: &Project, agent: &str, claim: &str, at: &Path, args: &[&str]) -> Vec<Run> {
    let line = args
        .iter()
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut runs = vec![p.cmd("swarm").role(agent).at(at).args(args).run()];
    for how in [
        format!("SWARMFORGE_ROLE={claim}"),
        "env -u SWARMFORGE_ROLE".into(),
    ] {
        runs.push(
            p.cmd("sh")
                .role(agent)
                .at(at)
                .bins_on_path()
                .args(["-c", &format!("{how} swarm {line}; exit $?")])
                .run(),
        );
    }
    runs
}

fn assert_person_only(runs: &[Run], what: &str) {
    for r in runs {
        assert_eq!(r.code, 2, "{what}: {r:?}");
        r.stderr_has("PERSON_ONLY");
        r.stderr_has("SWARMFORGE_ROLE in this process or its parents");
    }
}

fn id_of(queued: &Path) -> String {
    let name = file_name(queued);
    let rest = name.split_once('_').unwrap().1;
    rest.split("_to_").next().unwrap().to_string()
}

/// `lead` (an agent) sends `boss` (a person) a note; the agent tries to mark
/// it done with the very command `swarm status` prints: refused as itself,
/// claiming the person's role, and with the variable dropped, with the same
/// code and message shape as the other person-only actions; the note still
/// waits. The person marks it done.
#[test]
fn an_agent_cannot_mark_a_persons_item_done() {
    let p = Project::builder()
        .role("lead")
        .role(Role::new("boss").worktree("boss").agent("human"))
        .config("wake: {method: none}\n")
        .build();
    let queued = p
        .send_as(
            "lead",
            "type: note\nto: boss\npriority: 50\nmessage: build is green\n",
        )
        .ok()
        .queued();
    p.deliver_once().ok();
    let id = id_of(&queued);
    let copy = copies_of(&p.wt_path("boss"), &file_name(&queued));
    assert_eq!(copy.len(), 1);

    let runs = as_agent_every_way(
        &p,
        "lead",
        "boss",
        &p.root,
        &["inbox", "done", &id, "--role", "boss"],
    );
    assert_person_only(&runs, "inbox done");
    runs[0]
        .stderr_has("boss is a person")
        .stderr_has("agent lead");
    assert!(copy[0].exists(), "the person's item still waits");
    p.swarm(&["inbox", "--json"]).ok().stdout_has(&id);

    // The person, from their own shell and from their own pane.
    p.cmd("swarm")
        .role("boss")
        .args(["inbox", "done", &id])
        .run()
        .ok()
        .stdout_has("COMPLETED: ");
    assert!(!copy[0].exists());
}

/// A person reserves for `reviewer`; the agent `coder` tries to release that
/// reservation and to reserve in reviewer's name by setting or dropping
/// SWARMFORGE_ROLE, or from reviewer's worktree: refused (PERSON_ONLY), the
/// reservation stays. The agent reserves in its own name; the person
/// releases reviewer's.
#[test]
fn an_agent_reserves_and_releases_only_in_its_own_name() {
    let p = Project::coder_and_reviewer();
    p.swarm(&["reserve", "--as", "reviewer", "r.txt"])
        .ok()
        .stdout_has("reviewer holds r.txt");
    let rev = p.wt_path("rev");

    // Naming reviewer with --as, claiming it in the agent's own shell, and
    // dropping the variable in reviewer's worktree (which names reviewer).
    let agent_sh = |at: &Path, line: &str| {
        p.cmd("sh")
            .role("coder")
            .at(at)
            .bins_on_path()
            .args(["-c", &format!("{line}; exit $?")])
            .run()
    };
    let runs = vec![
        p.cmd("swarm")
            .role("coder")
            .args(["release", "--as", "reviewer"])
            .run(),
        agent_sh(&p.root, "SWARMFORGE_ROLE=reviewer swarm release"),
        agent_sh(&rev, "SWARMFORGE_ROLE=reviewer swarm release r.txt"),
        agent_sh(&rev, "env -u SWARMFORGE_ROLE swarm release"),
        agent_sh(&p.root, "SWARMFORGE_ROLE=reviewer swarm reserve x.txt"),
        agent_sh(&rev, "env -u SWARMFORGE_ROLE swarm reserve y.txt"),
        agent_sh(&p.root, "swarm reserve --as reviewer z.txt"),
    ];
    assert_person_only(&runs, "release/reserve");
    runs[1].stderr_has("swarm release as reviewer");
    let held = p.swarm(&["reservations", "--json"]).ok().json();
    let rs = held["reservations"].as_array().unwrap();
    assert_eq!(rs.len(), 1, "{held}");
    assert_eq!(rs[0]["role"], "reviewer");

    // In its own name: fine.
    p.cmd("swarm")
        .role("coder")
        .args(["reserve", "c.txt"])
        .run()
        .ok()
        .stdout_has("coder holds c.txt");
    p.cmd("swarm")
        .role("coder")
        .args(["release", "c.txt"])
        .run()
        .ok();
    // The person releases reviewer's, from reviewer's worktree.
    p.cmd("swarm")
        .at(&rev)
        .args(["release"])
        .run()
        .ok()
        .stdout_has("RELEASED: r.txt (reviewer)");
}

/// Every person-only action (start a card, pause, resume, approve, deny,
/// raise a budget) asks the caller's ancestry: an agent is refused with
/// PERSON_ONLY as itself, claiming the person's role, or with the variable
/// dropped. A person starts the card.
#[test]
fn every_persons_decision_refuses_an_agent_however_it_names_itself() {
    let p = Project::builder()
        .role("lead")
        .role(Role::new("boss").worktree("boss").agent("human"))
        .config("wake: {method: none}\ncards:\n  change: [lead]\n")
        .queue_dirs()
        .build();
    let actions: [&[&str]; 6] = [
        &["card", "new", "change", "c1", "--text", "a change"],
        &["pause"],
        &["resume"],
        &["approve", "x", "--sha256", "00"],
        &["deny", "x", "--reason", "no"],
        &["budget", "raise", "lead", "--tokens", "5"],
    ];
    for args in actions {
        let runs = as_agent_every_way(&p, "lead", "boss", &p.root, args);
        assert_person_only(&runs, &args.join(" "));
    }
    assert!(
        !p.path(".swarmforge/board/c1.txt").exists(),
        "no card started"
    );
    p.swarm(&["card", "new", "change", "c1", "--text", "a change"])
        .ok()
        .stdout_has("CARD QUEUED: c1 (change) for lead");
}
