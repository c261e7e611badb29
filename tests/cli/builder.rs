//! The test builder itself: a project in either layout is one the real
//! binaries work in, from each role's worktree.

use crate::support::{assert_count, assert_gone, in_ci, require_tool, Layout, Project, Role};

/// A note from the main worktree to a role in its own, delivered and taken.
fn a_note_travels(layout: Layout) {
    let p = Project::builder()
        .layout(layout)
        .role("coder")
        .role(Role::new("reviewer").worktree("rev"))
        .config("wake: {method: none}\n")
        .build();
    let queued = p
        .send_as(
            "coder",
            "type: note\nto: reviewer\npriority: 50\nmessage: hi\n",
        )
        .queued();
    p.deliver_once().ok();
    assert_gone(&queued);
    p.cmd("ready-next")
        .role("reviewer")
        .code(0)
        .stdout_has("TASK: ")
        .stdout_has("\nFROM: coder\n")
        .run();
    assert_count(&p.hq("rev", "inbox/in_process"), 1);
    assert_count(&p.hq("rev", "inbox/new"), 0);
}

#[test]
fn a_note_travels_in_the_swarm_init_layout() {
    a_note_travels(Layout::Init);
}

#[test]
fn a_note_travels_in_swarmforges_own_layout() {
    a_note_travels(Layout::SwarmForge);
}

/// A missing tool skips the test (false) outside CI and fails it in CI.
#[test]
fn a_missing_tool_skips_outside_ci_and_fails_in_ci() {
    assert!(require_tool("sh", "apt-get install -y dash"));
    let missing = std::panic::catch_unwind(|| {
        require_tool(
            "no-such-tool-for-swarm-handoff",
            "apt-get install -y nothing",
        )
    });
    match in_ci() {
        true => assert!(missing.is_err(), "CI=true must fail the test"),
        false => assert!(!missing.unwrap(), "a missing tool is reported missing"),
    }
}
