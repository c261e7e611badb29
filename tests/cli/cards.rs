//! Today's SwarmForge's cards, routes, board and merge-only copies
//! (docs/swarmforge-compat.md §4), in both layouts, from upstream's own
//! documented example.

use std::fs;
use std::path::Path;

use crate::support::{
    file_header, git, handoff_names, wait_until, Layout, Project, Role, Run, DEADLINE,
};

pub(crate) const LAYOUTS: [Layout; 2] = [Layout::Init, Layout::SwarmForge];

/// Upstream's `lieutenant` README, "The `swarmforge.conf` File":
///
/// ```conf
/// card change lead implement verify
/// card review verify
/// window-invisible lead codex master
/// window-invisible implement claude implementation task back-one
/// window-invisible verify copilot verification batch back-all
/// ```
const CONF: &str = "card change lead implement verify\n\
card review verify\n\
window-invisible lead codex master\n\
window-invisible implement claude implementation task back-one\n\
window-invisible verify copilot verification batch back-all\n";

/// The same swarm in swarm.yaml's words.
const YAML: &str = "wake: {method: none}\n\
cards:\n  change: [lead, implement, verify]\n  review: [verify]\n\
roles:\n\
  - {name: lead, agent: codex}\n\
  - {name: implement, agent: claude, worktree: implementation, propagation: back-one}\n\
  - {name: verify, agent: copilot, worktree: verification, mode: batch, propagation: back-all}\n";

/// The README's example swarm, without agents (the tests play them).
pub(crate) fn project(layout: Layout) -> Project {
    let p = Project::builder()
        .layout(layout)
        .role("lead")
        .role(Role::new("implement").worktree("implementation"))
        .role(Role::new("verify").worktree("verification").mode("batch"))
        .queue_dirs()
        .build();
    match layout {
        Layout::SwarmForge => {
            p.write("swarmforge/swarmforge.conf", CONF);
            p.write("swarmforge/constitution.prompt", "Be kind.\n");
            p.config("wake: {method: none}\n");
        }
        Layout::Init => {
            p.config(YAML);
        }
    }
    p
}

/// A swarm without cards: role `a` at the root and each of `others` in a
/// worktree of its own name, laid out as `layout`, no wake-ups.
pub(crate) fn plain(layout: Layout, others: &[&str]) -> Project {
    let mut b = Project::builder().layout(layout).role("a");
    for r in others {
        b = b.role(Role::new(r).worktree(r));
    }
    let p = b.queue_dirs().build();
    p.config("wake: {method: none}\n");
    p
}

/// tasks.tsv's line for `name`, split into its columns.
fn row(p: &Project, name: &str) -> Vec<String> {
    let text = p.read(".swarmforge/board/tasks.tsv");
    let line = text
        .lines()
        .find(|l| l.split('\t').next() == Some(name))
        .unwrap_or_else(|| panic!("no card {name} in tasks.tsv:\n{text}"));
    line.split('\t').map(str::to_string).collect()
}

pub(crate) fn lane(p: &Project, name: &str) -> String {
    row(p, name)[1].clone()
}

/// Commits a file in `role`'s worktree.
pub(crate) fn commit(p: &Project, role: &str, what: &str) {
    let wt = p.role_dir(role);
    fs::write(wt.join(format!("{what}.txt")), what).unwrap();
    git(&wt, &["add", &format!("{what}.txt")]);
    git(&wt, &["commit", "-q", "-m", what]);
}

/// Takes `role`'s next item and finishes it.
fn take_and_finish(p: &Project, role: &str) -> Run {
    let r = p.cmd("ready-next").role(role).run();
    r.ok();
    p.cmd("done-current").role(role).run().ok();
    r
}

pub(crate) fn git_handoff(to: &str, task: &str) -> String {
    format!("type: git_handoff\nto: {to}\npriority: 50\ntask: {task}\n")
}

/// `role` hands `task` to `to`; returns every `HANDOFF QUEUED:` path (the
/// handoff, then its merge-only copies).
fn hand(p: &Project, role: &str, to: &str, task: &str) -> Vec<String> {
    let r = p.send_as(role, &git_handoff(to, task));
    r.ok();
    r.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("HANDOFF QUEUED: "))
        .map(str::to_string)
        .collect()
}

/// A merge-only copy, as upstream writes one: priority `00`, `non-forwarding: true`.
fn assert_copy(copy: &Path) {
    assert_eq!(file_header(copy, "non-forwarding").as_deref(), Some("true"));
    assert_eq!(file_header(copy, "priority").as_deref(), Some("00"));
    assert_eq!(
        file_header(copy, "delivery_kind").as_deref(),
        Some("reverse")
    );
}

/// Upstream's `lieutenant` README: "Each `card` line defines one New Task
/// type and its ordered active route. The first role is its starting lane,
/// each following role is the next handoff destination, and the last role
/// completes it", "Cards move when `handoffd` delivers a forward
/// `git_handoff`", "Merge-only copies from `back-one` or `back-all` do not
/// move the card. The last role on the card's configured route sends the
/// terminal handoff to every configured role earlier than it in window
/// order; only that complete recipient set moves the card to **Done**"; and
/// `pack_web.bb`'s board file, `.swarmforge/board/tasks.tsv`, one card a
/// line: `name lane created updated task_id audit_count`.
#[test]
fn a_card_moves_lane_by_lane_along_its_route_to_done() {
    for layout in LAYOUTS {
        let p = project(layout);
        p.swarm(&[
            "card",
            "new",
            "change",
            "jump",
            "--text",
            "Make the wumpus jump.",
        ])
        .ok()
        .stdout_has("CARD QUEUED: jump (change) for lead: ");
        let cols = row(&p, "jump");
        assert_eq!(cols.len(), 6, "{layout:?}: {cols:?}");
        assert_eq!(
            (cols[1].as_str(), cols[4].as_str(), cols[5].as_str()),
            ("new", "jump", "0")
        );
        assert_eq!(
            p.read(".swarmforge/board/jump.txt"),
            "Make the wumpus jump.\n"
        );

        p.deliver_once().ok();
        assert_eq!(lane(&p, "jump"), "lead", "{layout:?}");
        // Upstream's script_test.clj,
        // `ready-for-next-task-prints-card-type-and-this-card`: "CARD_TYPE:
        // component", "THIS_CARD: next coder".
        let r = take_and_finish(&p, "lead");
        assert!(
            r.stdout.contains("Make the wumpus jump."),
            "{layout:?}: {}",
            r.stdout
        );
        r.stdout_has("TASK_NAME: jump\nCARD_TYPE: change\nTHIS_CARD: next implement\n");

        commit(&p, "lead", "spec");
        p.send_as("lead", &git_handoff("implement", "jump")).ok();
        p.deliver_once().ok();
        assert_eq!(lane(&p, "jump"), "implement", "{layout:?}");
        take_and_finish(&p, "implement").stdout_has("THIS_CARD: next verify\n");

        // implement is back-one: a merge-only copy to lead, which does not
        // move the card.
        commit(&p, "implement", "code");
        let queued = hand(&p, "implement", "verify", "jump");
        assert_eq!(queued.len(), 2, "{layout:?}: {queued:?}");
        p.deliver_once().ok();
        assert_eq!(lane(&p, "jump"), "verify", "{layout:?}");
        let lead_new = p.hq("master", "inbox/new");
        let names = handoff_names(&lead_new);
        assert_eq!(
            names.len(),
            1,
            "{layout:?}: {}",
            p.read(".swarmforge/daemon/handoffd.log")
        );
        let copy = lead_new.join(&names[0]);
        assert_copy(&copy);
        assert_eq!(file_header(&copy, "task").as_deref(), Some("jump"));
        // A merge-only copy names its card but nobody hands it on.
        let r = take_and_finish(&p, "lead");
        r.stdout_has("CARD_TYPE: change\n");
        assert!(!r.stdout.contains("THIS_CARD:"), "{}", r.stdout);
        // `ready-for-next-batch-prints-card-type-and-this-card`: "THIS_CARD:
        // last; terminal to: specifier,coder".
        take_and_finish(&p, "verify").stdout_has("THIS_CARD: last; terminal to: lead,implement\n");

        // A partial terminal set is no terminal: the card stays.
        commit(&p, "verify", "checked");
        p.send_as("verify", &git_handoff("implement", "jump")).ok();
        p.deliver_once().ok();
        assert_eq!(lane(&p, "jump"), "implement", "{layout:?}: a handback");
        take_and_finish(&p, "implement");
        commit(&p, "implement", "fixed");
        p.send_as("implement", &git_handoff("verify", "jump")).ok();
        p.deliver_once().ok();
        assert_eq!(lane(&p, "jump"), "verify");
        take_and_finish(&p, "lead");
        take_and_finish(&p, "verify");

        // The terminal handoff: verify (back-all) to every role before it
        // in window order; no copies for a terminal.
        commit(&p, "verify", "verified");
        let queued = hand(&p, "verify", "lead,implement", "jump");
        assert_eq!(queued.len(), 1, "{queued:?}");
        assert_eq!(
            file_header(Path::new(&queued[0]), "delivery_kind").as_deref(),
            Some("terminal")
        );
        p.deliver_once().ok();
        assert_eq!(lane(&p, "jump"), "done", "{layout:?}");
        // The result is merged where it arrives, not handed on.
        let r = take_and_finish(&p, "implement");
        r.stdout_has("CARD_TYPE: change\n");
        assert!(!r.stdout.contains("THIS_CARD:"), "{}", r.stdout);
        // A done card takes no more handoffs (upstream's `swarm_handoff.bb`).
        commit(&p, "implement", "late");
        let r = p.send_as("implement", &git_handoff("verify", "jump"));
        assert_eq!(r.code, 2, "{layout:?}: {}", r.stdout);
        assert!(
            r.stderr
                .contains("- Task 'jump' is done and cannot accept new handoffs."),
            "{}",
            r.stderr
        );

        let st = p.swarm(&["status"]);
        st.ok().stdout_has("board: jump (change) done\n");
        assert!(!st.stdout.contains("NOT IN STEP"), "{}", st.stdout);
        p.swarm(&["card", "list"])
            .ok()
            .stdout_has("board: jump (change) done\n");
        p.swarm(&["transcript"])
            .ok()
            .stdout_has("board: jump (change) done\n");
        p.swarm(&["audit", "--check"]).ok();
        let v = p.swarm(&["status", "--json"]).json();
        assert_eq!(v["board"]["cards"][0]["lane"], "done", "{v}");
        assert_eq!(v["board"]["cards"][0]["type"], "change", "{v}");

        // Names are checked, types must be declared, a name is taken once.
        let r = p.swarm(&["card", "new", "change", "jump"]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("CARD_EXISTS"), "{}", r.stderr);
        let r = p.swarm(&["card", "new", "bugfix", "x"]);
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.contains("unknown card type 'bugfix'") && r.stderr.contains("change, review"),
            "{}",
            r.stderr
        );
        let r = p.swarm(&["card", "new", "change", "../x"]);
        assert_eq!(r.code, 1);
        assert!(r.stderr.contains("is not a name"), "{}", r.stderr);
    }
}

/// The board is a function of the handoffs: a tasks.tsv that says
/// otherwise (a hand edit, or a crash between a delivery and the board's
/// write) is "not OK" for `swarm audit --check` and `swarm status`, and the
/// daemon's next first pass writes it back.
#[test]
fn the_board_disagreeing_with_the_handoffs_is_not_ok_and_is_repaired() {
    for layout in LAYOUTS {
        let p = project(layout);
        p.swarm(&["card", "new", "review", "look"]).ok();
        p.deliver_once().ok();
        assert_eq!(lane(&p, "look"), "verify");
        p.swarm(&["audit", "--check"]).ok();
        let good = p.read(".swarmforge/board/tasks.tsv");

        // A hand edit.
        p.write(
            ".swarmforge/board/tasks.tsv",
            &good.replace("\tverify\t", "\tdone\t"),
        );
        let r = p.swarm(&["audit", "--check"]);
        assert_eq!(r.code, 2, "{layout:?}: {}", r.stdout);
        assert!(
            r.stdout.contains("VIOLATION board ")
                && r.stdout.contains(
                    "card 'look' is in lane 'done'; the handoffs put it in lane 'verify'"
                ),
            "{}",
            r.stdout
        );
        p.swarm(&["status"])
            .ok()
            .stdout_has("board: NOT IN STEP with .swarmforge/board/tasks.tsv: card 'look'");
        p.deliver_once().ok();
        assert_eq!(
            p.read(".swarmforge/board/tasks.tsv"),
            good,
            "{layout:?}: rewritten"
        );

        // The board lost (a crash before its first write): said, then rebuilt
        // with the same bytes.
        fs::remove_file(p.path(".swarmforge/board/tasks.tsv")).unwrap();
        let r = p.swarm(&["audit", "--check"]);
        assert_eq!(r.code, 2);
        assert!(r.stdout.contains("the file is missing"), "{}", r.stdout);
        p.deliver_once().ok();
        assert_eq!(p.read(".swarmforge/board/tasks.tsv"), good);
        p.swarm(&["audit", "--check"]).ok();
    }
}

/// tasks.tsv's lane of `name`, when the file and the card are there.
fn lane_now(p: &Project, name: &str) -> Option<String> {
    let text = fs::read_to_string(p.path(".swarmforge/board/tasks.tsv")).ok()?;
    let line = text.lines().find(|l| l.split('\t').next() == Some(name))?;
    line.split('\t').nth(1).map(str::to_string)
}

/// A running handoffd folds what each pass delivered into its cache of
/// the board, `.swarmforge/board/derived.json`, instead of reading every
/// handoff again (the cost no longer grows with the history; figures in
/// docs/swarmforge-compat.md §4). The cache is only a hint: a lying one
/// shows as `VIOLATION board` (the check derives from the files), a
/// restart derives from the files again, and a lost one is rebuilt.
#[test]
fn the_board_is_folded_pass_by_pass_and_its_cache_is_only_a_hint() {
    let p = project(Layout::Init);
    let d = p.spawn_daemon(&[]);
    p.swarm(&["card", "new", "review", "look"]).ok();
    wait_until(DEADLINE, "look with verify", || {
        lane_now(&p, "look").as_deref() == Some("verify")
    });
    let cache = p.path(".swarmforge/board/derived.json");
    assert!(cache.exists());
    p.swarm(&["audit", "--check"]).ok();

    let text = fs::read_to_string(&cache).unwrap();
    assert!(text.contains("\"lane\":\"verify\""), "{text}");
    fs::write(
        &cache,
        text.replace("\"lane\":\"verify\"", "\"lane\":\"done\""),
    )
    .unwrap();
    // A delivering pass (a note: it moves no card).
    let r = p.send(
        "lead",
        "type: note\nto: implement\npriority: 50\nmessage: hi\n",
    );
    r.ok();
    wait_until(DEADLINE, "the note delivered", || {
        p.log()
            .lines()
            .any(|l| l.contains("delivered") && l.contains("_from_lead_to_implement"))
    });
    wait_until(DEADLINE, "the pass's board written", || {
        lane_now(&p, "look").as_deref() == Some("done")
    });
    let r = p.swarm(&["audit", "--check"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stdout.contains("VIOLATION board "), "{}", r.stdout);

    drop(d);
    let _d = p.spawn_daemon(&[]);
    wait_until(DEADLINE, "look back with verify", || {
        lane_now(&p, "look").as_deref() == Some("verify")
    });
    p.swarm(&["audit", "--check"]).ok();

    fs::remove_file(&cache).unwrap();
    p.swarm(&["card", "new", "review", "third"]).ok();
    wait_until(DEADLINE, "third with verify", || {
        lane_now(&p, "third").as_deref() == Some("verify")
    });
    assert!(cache.exists(), "the cache was not rebuilt");
    p.swarm(&["audit", "--check"]).ok();
}

/// Only in the launcher layout: a project without cards has no board.
#[test]
fn no_card_types_no_board() {
    let p = plain(Layout::Init, &["b"]);
    let r = p.swarm(&["card", "new", "x", "y"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("no card types are declared"),
        "{}",
        r.stderr
    );
    p.deliver_once().ok();
    assert!(!Path::new(&p.path(".swarmforge/board")).exists());
}

/// The scripted agent of the proof, working as a SwarmForge prompt tells an
/// agent to: each run (one per wake-up) works its queue through SwarmForge's
/// helper names until `NO_TASK`. It merges what arrives; where the printout
/// says `THIS_CARD: next <role>` or `THIS_CARD: last; terminal to: <roles>`
/// it works (a file, a commit) and hands the card on through the audit gate
/// (the first call answers `AUDIT_REQUIRED`, the unchanged second queues
/// it and finishes the item, printing `MAIL_WAITING` or `NO_TASK` as
/// `done_with_current.sh` would); a merge-only copy or a terminal result
/// carries no `THIS_CARD`, and is finished with `done_with_current.sh`.
const AGENT: &str = r#"#!/bin/sh
set -eu
me=$SWARMFORGE_ROLE
gitc() { git -c user.name="$me" -c user.email="$me@swarm.invalid" "$@"; }
field() { printf '%s\n' "$out" | sed -n "s/^$1//p" | head -n 1; }
out=$(ready_for_next.sh)
until [ "$out" = NO_TASK ]; do
    task=$(field 'TASK_NAME: ')
    commits=$(printf '%s\n' "$out" | sed -n 's/^merge_and_process [A-Za-z0-9-]* \([0-9a-f]\{10\}\)$/\1/p')
    next=$(field 'THIS_CARD: next ')
    terminal=$(field 'THIS_CARD: last; terminal to: ')
    to=${next:-$terminal}
    for c in $commits; do gitc merge -q --no-edit "$c"; done
    if [ -n "$to" ]; then
        echo "$me worked on $task" >"$me-$task.txt"
        gitc add "$me-$task.txt"
        gitc commit -q -m "$me: $task"
        mkdir -p tmp
        printf 'type: git_handoff\nto: %s\npriority: 50\ntask: %s\n' "$to" "$task" >tmp/handoff.txt
        swarm_handoff.sh ./tmp/handoff.txt | grep -qx AUDIT_REQUIRED
        done=$(swarm_handoff.sh ./tmp/handoff.txt)
        printf '%s\n' "$done" | grep -q '^HANDOFF QUEUED: '
    else
        done=$(done_with_current.sh)
    fi
    case "$done" in
        *MAIL_WAITING) out=$(ready_for_next.sh) ;;
        *) out=NO_TASK ;;
    esac
done
"#;

/// The proof (docs/swarmforge-compat.md §4): a SwarmForge project laid out
/// as its `lieutenant` README describes it ("`swarmforge/swarmforge.conf`
/// defines card routes and the swarm window by window", the README's own
/// example: `card change lead implement verify`, `window-invisible lead …
/// master`, `window-invisible implement … implementation task back-one`,
/// `window-invisible verify … verification … back-all`), with the audit
/// gate ("The first valid Git handoff call returns `AUDIT_REQUIRED` …
/// increments the task card's audit counter … Only an unchanged second call
/// queues the handoff"), runs one card from New to Done under `swarm up`:
/// real tmux, real binaries, scripted agents woken by handoffd. Then the
/// same swarm from swarm.yaml (`swarm init`'s layout).
#[test]
fn a_swarmforge_project_runs_a_card_from_new_to_done_under_swarm_up() {
    if !crate::support::require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    for layout in LAYOUTS {
        let d = Project::empty();
        git(&d.root, &["init", "-q", "-b", "master"]);
        d.write("README", "a wumpus game\n");
        d.write("agents/agent.sh", AGENT);
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(d.path("agents/agent.sh"), fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let yaml = "audit_gate: true\nlaunch: {stagger: 200ms}\n";
        match layout {
            Layout::SwarmForge => {
                d.write("swarmforge/constitution.prompt", "Be kind.\n");
                d.write(
                    "swarmforge/swarmforge.conf",
                    "card change lead implement verify\n\
                     card review verify\n\
                     window-invisible lead ./agents/agent.sh master\n\
                     window-invisible implement ./agents/agent.sh implementation task back-one\n\
                     window-invisible verify ./agents/agent.sh verification batch back-all\n",
                );
                d.write("swarm.yaml", yaml);
            }
            Layout::Init => {
                let agent = "sh \\\"$SWARMFORGE_PROJECT/agents/agent.sh\\\"";
                d.write(
                    "swarm.yaml",
                    &format!(
                        "{yaml}cards:\n  change: [lead, implement, verify]\n  review: [verify]\n\
                         roles:\n\
                         \x20 - {{name: lead, agent: \"{}\"}}\n\
                         \x20 - {{name: implement, agent: \"{}\", worktree: implementation, propagation: back-one}}\n\
                         \x20 - {{name: verify, agent: \"{}\", worktree: verification, mode: batch, propagation: back-all}}\n",
                        agent, agent, agent
                    ),
                );
            }
        }
        d.write(".gitignore", ".swarmforge/\n.worktrees/\ntmp/\n");
        git(&d.root, &["add", "."]);
        git(&d.root, &["commit", "-q", "-m", "init"]);

        let mut guard = crate::support::SwarmGuard::new(&d.root);
        let r = d.swarm(&["up", "--detach"]);
        assert_eq!(r.code, 0, "{layout:?}: {}\n{}", r.stdout, r.stderr);
        guard.socket = Some(std::path::PathBuf::from(
            d.read(".swarmforge/tmux-socket").trim(),
        ));

        // New Task: the card waits in `new`, then follows its route.
        d.swarm(&[
            "card",
            "new",
            "change",
            "jump",
            "--text",
            "Make the wumpus jump.",
        ])
        .ok();
        crate::support::wait_until(
            std::time::Duration::from_secs(120),
            "the card reaches done and every queue is empty",
            || {
                let done = d
                    .read(".swarmforge/board/tasks.tsv")
                    .lines()
                    .any(|l| l.starts_with("jump\tdone\t"));
                let st = d.swarm(&["status", "--json"]).json();
                let idle = st["roles"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|r| r["new"] == 0 && r["in_process"].is_null() && r["outbox"] == 0);
                done && idle
            },
        );
        let cols = row(&d, "jump");
        // One audit challenge for each of the three git_handoffs.
        assert_eq!(cols[5], "3", "{layout:?}: {cols:?}");
        d.swarm(&["status"])
            .ok()
            .stdout_has("board: jump (change) done, 3 audit(s)\n");
        d.swarm(&["audit", "--check"]).ok();
        // Everyone merged the terminal result: verify's file is in lead's tree.
        assert_eq!(
            d.read("verify-jump.txt"),
            "verify worked on jump\n",
            "{layout:?}"
        );
        assert!(d.path(".worktrees/implementation/verify-jump.txt").exists());
        // lead got implement's merge-only copy (back-one) and merged it.
        let lead_done = d.path(".swarmforge/handoffs/inbox/completed");
        let copies = handoff_names(&lead_done)
            .into_iter()
            .filter(|n| file_header(&lead_done.join(n), "non-forwarding").is_some())
            .count();
        assert_eq!(
            copies,
            1,
            "{layout:?}: {:?}\n{}",
            handoff_names(&lead_done),
            d.read(".swarmforge/daemon/handoffd.log")
        );

        d.swarm(&["down"]).ok();
        drop(guard);
    }
}

/// `back-all` (the `lieutenant` README: "also queue merge-only copies to
/// every earlier role on this card's configured route"; handoff-protocol.md:
/// "`reverse` is a merge-only propagation copy to an earlier role … A
/// terminal delivery never generates additional propagation copies"). A role
/// between them in window order but not on the route gets none; a task that
/// is no card goes back in window order, as upstream's `swarm_handoff.bb`
/// (`reverse-roles`) does. Copies are `00`, `non-forwarding: true`, and move
/// no card.
#[test]
fn merge_only_copies_go_back_on_the_cards_route_and_move_nothing() {
    for layout in LAYOUTS {
        let p = plain(layout, &["b", "c", "d"]);
        match layout {
            Layout::SwarmForge => {
                p.write(
                    "swarmforge/swarmforge.conf",
                    "card hop a c d\nwindow a codex master\nwindow b codex b\nwindow c codex c task back-all\nwindow d codex d task back-all\n",
                );
                p.write("swarmforge/constitution.prompt", "x\n");
                p.config("wake: {method: none}\n");
            }
            Layout::Init => {
                p.config(
                    "wake: {method: none}\ncards: {hop: [a, c, d]}\nroles:\n  - {name: a, agent: codex}\n  - {name: b, agent: codex, worktree: b}\n  - {name: c, agent: codex, worktree: c, propagation: back-all}\n  - {name: d, agent: codex, worktree: d, propagation: back-all}\n",
                );
            }
        }
        p.swarm(&["card", "new", "hop", "h1"]).ok();
        p.deliver_once().ok();
        take_and_finish(&p, "a");
        commit(&p, "a", "a1");
        p.send_as("a", &git_handoff("c", "h1")).ok();
        p.deliver_once().ok();
        take_and_finish(&p, "c");
        commit(&p, "c", "c1");
        let queued = hand(&p, "c", "d", "h1");
        assert_eq!(queued.len(), 2, "{layout:?}: {queued:?}");
        assert!(queued[1].ends_with("_from_c_to_a.handoff"), "{queued:?}");
        p.deliver_once().ok();
        assert_eq!(lane(&p, "h1"), "d", "{layout:?}");
        assert!(
            handoff_names(&p.hq("b", "inbox/new")).is_empty(),
            "b is not on the route"
        );
        let copy = p
            .hq("master", "inbox/new")
            .join(&handoff_names(&p.hq("master", "inbox/new"))[0]);
        assert_copy(&copy);
        assert!(fs::read_to_string(&copy)
            .unwrap()
            .contains("Merge-only copy"));

        // A task that is no card is refused where there are cards
        // (cards_guards.rs); copies go back in window order only in a
        // project without cards (below).
        commit(&p, "c", "c2");
        let r = p.send_as("c", &git_handoff("d", "chore"));
        assert_eq!(r.code, 2, "{layout:?}: {}", r.stdout);

        // d is last on the route: its terminal result (to a, b, c: every
        // role before it in window order) makes no copies and ends the card.
        take_and_finish(&p, "d");
        commit(&p, "d", "d1");
        assert_eq!(hand(&p, "d", "a,b,c", "h1").len(), 1);
        p.deliver_once().ok();
        assert_eq!(lane(&p, "h1"), "done", "{layout:?}");
        p.swarm(&["audit", "--check"]).ok();
    }
    // Without cards a `back-all` role's copies go to every role before it
    // in window order (upstream's older `reverse-roles`).
    let p = plain(Layout::Init, &["b", "c", "d"]);
    p.config(
        "wake: {method: none}\nroles:\n  - {name: a, agent: codex}\n  - {name: b, agent: codex, worktree: b}\n  - {name: c, agent: codex, worktree: c, propagation: back-all}\n  - {name: d, agent: codex, worktree: d}\n",
    );
    commit(&p, "c", "c2");
    let queued = hand(&p, "c", "d", "chore");
    assert_eq!(queued.len(), 3, "{queued:?}");
    assert!(queued[2].ends_with("_from_c_to_b.handoff"), "{queued:?}");
}

/// Upstream: "A route must be nonempty, contain no duplicate roles, and
/// name only roles defined by window lines"; swarm.yaml's `cards:` is held
/// to the same rule by `swarm init` (swarmforge.conf's by the conf check,
/// `compat::todays_swarmforge_conf_lines_start_and_doctor_says_what_is_not_acted_on`).
#[test]
fn a_yaml_route_naming_no_role_is_refused() {
    let d = Project::empty();
    d.write(
        "swarm.yaml",
        "cards: {fix: [a, ghost]}\nroles:\n  - {name: a, agent: human}\n",
    );
    let r = d.swarm(&["init"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("swarm.yaml: card 'fix': role 'ghost' is not a role of this swarm"),
        "{}",
        r.stderr
    );
    d.write(
        "swarm.yaml",
        "cards: {fix: [a, a]}\nroles:\n  - {name: a, agent: human}\n",
    );
    let r = d.swarm(&["init"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("role 'a' appears twice in its route"),
        "{}",
        r.stderr
    );
}

/// Today's SwarmForge's batch mode. Its `lieutenant` README: "Use `batch`
/// for roles that should consume queued handoffs that share priority, card
/// type, and reverse/forward with the first file as one batch. Equal
/// priority of a different type or direction stays queued." Its
/// `ready_for_next_batch.bb` (`batch-key`: the `priority`, the `card_type`
/// and whether the file is `non-forwarding: true` or priority `00`). Its
/// `swarm_handoff.bb` (`with-batch-task-ids`: a git_handoff sent while the
/// current work names several cards carries `batch_task_ids`, the EDN
/// vector `(pr-str ids)`), and its handoffd test
/// `handoffd-moves-every-batch-card-and-leaves-unrelated-cards`: one result
/// moves every card it names.
#[test]
fn a_batch_is_one_card_type_and_direction_and_its_one_result_moves_every_card() {
    for layout in LAYOUTS {
        let p = project(layout);
        for name in ["pits", "bats"] {
            p.swarm(&["card", "new", "change", name]).ok();
        }
        p.deliver_once().ok();
        for (role, to) in [("lead", "implement"), ("implement", "verify")] {
            for name in ["pits", "bats"] {
                p.cmd("ready-next").role(role).run().ok();
                commit(&p, role, &format!("{role}-{name}"));
                p.send_as(role, &git_handoff(to, name)).ok();
                p.cmd("done-current").role(role).run().ok();
            }
            p.deliver_once().ok();
        }
        // A card of another type, at the same priority, for the same role.
        p.swarm(&["card", "new", "review", "check"]).ok();
        p.deliver_once().ok();
        let verify_new = p.hq("verification", "inbox/new");
        assert_eq!(handoff_names(&verify_new).len(), 3, "{layout:?}");

        // Which comes first in `new/` depends on the senders' sequence
        // numbers within one second; either way the review card is a
        // batch of its own and the two change cards one batch.
        let alone = |r: &Run| {
            r.stdout_has("COUNT: 1\n")
                .stdout_has("TASK_NAME: check\nCARD_TYPE: review\n");
        };
        let mut r = p.cmd("ready-next").role("verify").run();
        r.ok();
        let check_first = r.stdout.contains("TASK_NAME: check\n");
        if check_first {
            alone(&r);
            r = p.cmd("done-current").role("verify").run();
            r.ok();
        }
        r.stdout_has("COUNT: 2\n");
        assert!(
            r.stdout.contains("TASK_NAME: pits\n")
                && r.stdout.contains("TASK_NAME: bats\n")
                && !r.stdout.contains("TASK_NAME: check\n"),
            "{layout:?}: {}",
            r.stdout
        );
        if !check_first {
            let left = handoff_names(&verify_new);
            assert_eq!(left.len(), 1, "{layout:?}: {left:?}");
            assert_eq!(
                file_header(&verify_new.join(&left[0]), "task").as_deref(),
                Some("check")
            );
        }

        // One terminal result for the batch names both cards.
        commit(&p, "verify", "verified-both");
        let queued = hand(&p, "verify", "lead,implement", "pits");
        assert_eq!(queued.len(), 1, "{queued:?}");
        assert_eq!(
            file_header(Path::new(&queued[0]), "batch_task_ids").as_deref(),
            Some(r#"["pits" "bats"]"#),
            "{layout:?}"
        );
        p.deliver_once().ok();
        assert_eq!(lane(&p, "pits"), "done", "{layout:?}");
        assert_eq!(lane(&p, "bats"), "done", "{layout:?}");
        assert_eq!(lane(&p, "check"), "verify", "{layout:?}");
        let st = p.swarm(&["status"]);
        st.ok().stdout_has("board: bats (change) done\n");
        assert!(!st.stdout.contains("NOT IN STEP"), "{}", st.stdout);
        p.swarm(&["audit", "--check"]).ok();

        // The other type is the next batch, alone.
        if !check_first {
            let r = p.cmd("done-current").role("verify").run();
            r.ok();
            alone(&r);
        }
    }
}

/// `OPEN_CARDS`, from `done_with_current.bb` of TT1410/swarm-forge (a fork
/// that tracks upstream; docs/swarmforge-compat.md §4): with a board, "refuse
/// while forwarded cards still sit in this lane" (exit 3):
/// "OPEN_CARDS: current work still has cards without an outgoing
/// git_handoff:", one `- <card>` line each, then how to go on; a card named
/// by a git_handoff of this role waiting in an outbox or for approval is not
/// open (`outbound-card-ids`); `--drop` finishes anyway and prints
/// `DROPPED: <card>`. Here for today's contract (`done_with_current.sh`,
/// i.e. `done-current --mail-waiting`); `done-current` alone keeps the
/// older one.
#[test]
fn done_with_current_refuses_while_a_card_has_no_outgoing_handoff() {
    for layout in LAYOUTS {
        let p = project(layout);
        p.swarm(&["card", "new", "change", "jump"]).ok();
        p.deliver_once().ok();
        p.cmd("ready-next").role("lead").run().ok();
        let in_process = p.hq("master", "inbox/in_process");
        let r = p
            .cmd("done-current")
            .role("lead")
            .arg("--mail-waiting")
            .run();
        assert_eq!(r.code, 3, "{layout:?}: {}{}", r.stdout, r.stderr);
        r.stderr_has(
            "OPEN_CARDS: current work still has cards without an outgoing git_handoff:\n- jump\n",
        )
        .stderr_has("done_with_current.sh --drop");
        assert_eq!(handoff_names(&in_process).len(), 1, "{layout:?}: kept");

        // Handed on (queued, not yet delivered): no longer open.
        commit(&p, "lead", "spec");
        p.send_as("lead", &git_handoff("implement", "jump")).ok();
        p.cmd("done-current")
            .role("lead")
            .arg("--mail-waiting")
            .run()
            .ok()
            .stdout_has("COMPLETED: ");
        p.deliver_once().ok();
        assert_eq!(lane(&p, "jump"), "implement");

        // `--drop` finishes and leaves the card in this lane.
        p.cmd("ready-next").role("implement").run().ok();
        let r = p
            .cmd("done-current")
            .role("implement")
            .args(["--mail-waiting", "--drop"])
            .run();
        r.ok().stdout_has("DROPPED: jump\nCOMPLETED: ");
        p.deliver_once().ok();
        assert_eq!(lane(&p, "jump"), "implement", "{layout:?}");
        // The older contract is unchanged.
        p.swarm(&["card", "new", "change", "hop"]).ok();
        p.deliver_once().ok();
        take_and_finish(&p, "lead");
    }
}

/// A card moves only for the role whose lane holds it: `verify`, the
/// route's last role, naming a card still in `implement`'s lane in its
/// terminal handoff does not move it to Done, and `implement` hands it on
/// as before (issue 43, point 9).
#[test]
fn a_card_moves_only_for_the_role_whose_lane_holds_it() {
    let p = project(Layout::Init);
    p.swarm(&["card", "new", "change", "jump", "--text", "Jump."])
        .ok();
    p.deliver_once().ok();
    take_and_finish(&p, "lead");
    commit(&p, "lead", "spec");
    p.send_as("lead", &git_handoff("implement", "jump")).ok();
    p.deliver_once().ok();
    assert_eq!(lane(&p, "jump"), "implement");
    // verify has not been handed the card, and claims it is done.
    commit(&p, "verify", "forged");
    p.send_as("verify", &git_handoff("lead,implement", "jump"))
        .ok();
    p.deliver_once().ok();
    assert_eq!(lane(&p, "jump"), "implement");
    // The role really working it hands it on.
    take_and_finish(&p, "implement");
    commit(&p, "implement", "code");
    hand(&p, "implement", "verify", "jump");
    p.deliver_once().ok();
    assert_eq!(lane(&p, "jump"), "verify");
}
