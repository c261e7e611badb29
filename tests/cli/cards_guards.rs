//! Today's SwarmForge's two guards around a card's handoff
//! (docs/swarmforge-compat.md §3, §4), in both layouts: `ready_for_next`
//! takes no new work while the role's `git_handoff` has not left
//! (`WAITING_FOR_APPROVAL`), and `swarm_handoff` refuses a `git_handoff`
//! whose task is not on the board.

use std::path::Path;

use crate::cards::{commit, git_handoff, lane, plain, project, LAYOUTS};
use crate::support::{handoff_names, hq, publish, Layout, Project};

/// Every `git_handoff` waits for a person, so one stays in
/// `pending_approval/` as long as the test needs.
const HOLD_GIT: &str = "types:\n  git_handoff:\n    approval: required\n";

fn hold_git_handoffs(p: &Project, layout: Layout) {
    let base = match layout {
        Layout::SwarmForge => "wake: {method: none}\n".to_string(),
        Layout::Init => p.read("swarm.yaml"),
    };
    p.config(&format!("{base}{HOLD_GIT}"));
}

/// `swarm approve <id> --sha256 <what status shows>` for the one hold.
fn approve_the_hold(p: &Project) {
    let st = p.swarm(&["status", "--json"]).ok().json();
    let h = &st["held"][0];
    let id = h["id"]
        .as_str()
        .unwrap_or_else(|| panic!("nothing held: {st}"));
    let sha = h["sha256"].as_str().unwrap();
    p.swarm(&["approve", id, "--sha256", sha]).ok();
}

/// Upstream's `ready_for_next_guard.bb` (forgelet-swarmforge, and the same
/// in today's `ready_for_next_task.bb` / `ready_for_next_batch.bb`, which
/// call it only when nothing is in process):
///
/// ```clojure
/// (defn active-outbound-git-files [role]
///   … (concat pending outbox-active)
///        (filter #(outbound-git-from-role? role %)) …)
/// (defn wait-message [active]
///   ["WAITING_FOR_APPROVAL: current git handoff is still active"
///    (str/join "\n" (map #(str "- " %) active))])
/// …
/// (when-let [active (seq (ready-for-next-guard/active-outbound-git-files
///                         (ready-for-next-guard/current-role)))]
///   (apply fail! 2 (ready-for-next-guard/wait-message active)))
/// ```
///
/// (`fail!` prints its lines on stderr and exits with 2.) A `git_handoff`
/// of the role in its outbox or held in `pending_approval/` keeps it from
/// taking new mail; the item in process is resumed all the same; without
/// cards nothing changes.
#[test]
fn ready_next_takes_no_new_work_while_its_git_handoff_has_not_left() {
    for layout in LAYOUTS {
        let p = project(layout);
        hold_git_handoffs(&p, layout);
        for name in ["jump", "hop"] {
            p.swarm(&["card", "new", "change", name]).ok();
        }
        p.deliver_once().ok();
        let lead_new = p.hq("master", "inbox/new");
        assert_eq!(handoff_names(&lead_new).len(), 2, "{layout:?}");

        p.cmd("ready-next").role("lead").run().ok();
        commit(&p, "lead", "spec");
        let queued = p
            .send_as("lead", &git_handoff("implement", "jump"))
            .queued();
        p.cmd("done-current")
            .role("lead")
            .arg("--mail-waiting")
            .run()
            .ok()
            .stdout_has("MAIL_WAITING\n");

        // In the outbox: refused, the file named, nothing taken.
        let r = p.cmd("ready-next").role("lead").run();
        assert_eq!(r.code, 2, "{layout:?}: {}{}", r.stdout, r.stderr);
        r.stderr_has("WAITING_FOR_APPROVAL: current git handoff is still active\n")
            .stderr_has(&format!("- {}", queued.display()));
        assert!(r.stdout.is_empty(), "{}", r.stdout);
        assert_eq!(handoff_names(&lead_new).len(), 1, "{layout:?}: hop waits");

        // Held for approval: still refused, and `swarm status` says why
        // lead does not move.
        p.deliver_once().ok();
        let held = p.hq("master", "pending_approval");
        let held_names = handoff_names(&held);
        assert_eq!(held_names.len(), 1, "{layout:?}");
        let r = p.cmd("ready-next").role("lead").run();
        assert_eq!(r.code, 2, "{layout:?}: {}", r.stderr);
        r.stderr_has("WAITING_FOR_APPROVAL: current git handoff is still active\n")
            .stderr_has(&format!("- {}", held.join(&held_names[0]).display()));
        let json = p.cmd("ready-next").role("lead").arg("--json").run();
        assert_eq!(json.code, 2);
        let e = json.json();
        assert_eq!(e["token"], "WAITING_FOR_APPROVAL", "{e}");
        assert_eq!(e["paths"].as_array().map(Vec::len), Some(1), "{e}");
        let st = p.swarm(&["status"]);
        st.ok()
            .stdout_has("waiting for approval: lead takes no new item until its held git_handoff ");
        let v = p.swarm(&["status", "--json"]).json();
        let lead = v["roles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["role"] == "lead")
            .unwrap();
        assert_eq!(
            lead["waiting_for_approval"].as_array().map(Vec::len),
            Some(1),
            "{lead}"
        );

        // Approved and delivered: the next card is taken.
        approve_the_hold(&p);
        p.deliver_once().ok();
        assert_eq!(lane(&p, "jump"), "implement", "{layout:?}");
        p.cmd("ready-next")
            .role("lead")
            .run()
            .ok()
            .stdout_has("TASK_NAME: hop\n");
        assert!(!p
            .swarm(&["status"])
            .stdout
            .contains("waiting for approval:"));

        // The item in process is resumed even while its handoff waits.
        commit(&p, "lead", "spec2");
        p.send_as("lead", &git_handoff("implement", "hop")).ok();
        p.cmd("ready-next")
            .role("lead")
            .run()
            .ok()
            .stdout_has("TASK_NAME: hop\n");
    }

    // A project without cards keeps the older contract: send, then take.
    let p = plain(Layout::Init, &["b"]);
    commit(&p, "a", "work");
    p.send_as("a", &git_handoff("b", "chore")).ok();
    p.cmd("ready-next")
        .role("a")
        .run()
        .ok()
        .stdout_has("NO_TASK");
}

/// Upstream's `swarm_handoff` state checks (`task-state-errors`, code index
/// file 69511782027), whose errors are the draft's validation errors
/// (`error-report`, `(System/exit 2)`):
///
/// ```clojure
/// (and (board-present?) (nil? in-process-id) (not task))
/// (conj (format "Handoff task_id '%s' is not a current board task." task-id))
/// ```
///
/// and its handoffd refuses a `git_handoff` whose task or any of its
/// `batch_task_ids` is not on the board (`validate-board-task-keys!`,
/// "unknown board task"). Here both are refused when the draft is sent:
/// `HANDOFF INVALID`, exit 2, nothing queued, the draft kept.
#[test]
fn a_git_handoff_whose_task_is_not_on_the_board_is_refused_and_kept() {
    for layout in LAYOUTS {
        let p = project(layout);
        p.swarm(&["card", "new", "change", "jump"]).ok();
        p.deliver_once().ok();
        let outbox = p.hq("master", "outbox");

        // Nothing in process (upstream's exact case).
        commit(&p, "lead", "stray");
        let r = p.send_as("lead", &git_handoff("implement", "chore"));
        assert_eq!(r.code, 2, "{layout:?}: {}{}", r.stdout, r.stderr);
        r.stderr_has("HANDOFF INVALID: ")
            .stderr_has("- Handoff task_id 'chore' is not a current board task.\n");
        assert!(
            handoff_names(&outbox).is_empty(),
            "{layout:?}: nothing queued"
        );
        assert!(
            p.role_dir("lead").join("draft-lead.txt").is_file(),
            "{layout:?}: the draft is kept"
        );

        // With the card in process, a task that is no card is refused too
        // (upstream's daemon would fail it), and the card itself goes.
        p.cmd("ready-next").role("lead").run().ok();
        let r = p.send_as("lead", &git_handoff("implement", "chore"));
        assert_eq!(r.code, 2, "{layout:?}: {}", r.stderr);
        r.stderr_has("- Handoff task_id 'chore' is not a current board task.\n");
        assert!(handoff_names(&outbox).is_empty(), "{layout:?}");
        p.send_as("lead", &git_handoff("implement", "jump")).ok();

        // A card the current work carries in `batch_task_ids` that is not
        // on the board.
        let implementation = carrying(&p, "[\"jump\" \"ghost\"]");
        let r = p.send_as("implement", &git_handoff("verify", "jump"));
        assert_eq!(r.code, 2, "{layout:?}: {}{}", r.stdout, r.stderr);
        r.stderr_has("- Handoff task_id 'ghost' is not a current board task.\n");
        assert!(
            handoff_names(&hq(&implementation, "outbox")).is_empty(),
            "{layout:?}"
        );
        assert!(Path::new(&implementation.join("draft-implement.txt")).is_file());
    }
}

/// `implement` takes a note on card `jump` carrying `batch_task_ids`
/// (`ids`, an EDN vector) and commits; returns its worktree.
pub(crate) fn carrying(p: &Project, ids: &str) -> std::path::PathBuf {
    let n = crate::support::note("lead", 900, "implement", "carried");
    let text = n.text.replace(
        "created_at:",
        &format!("task: jump\nbatch_task_ids: {ids}\ncreated_at:"),
    );
    let implementation = p.role_dir("implement");
    publish(
        &hq(&implementation, "inbox/new").join(&n.name),
        text.as_bytes(),
    );
    p.cmd("ready-next").role("implement").run().ok();
    commit(p, "implement", "code");
    implementation
}
