//! SwarmForge's generated first body line, "Re-read your role and
//! constitution.", is shown to roles of a SwarmForge project (which has the
//! constitution) and not to roles declared in `swarm.yaml` without one,
//! which have nothing of the kind to re-read (docs/agents.md, "The primer").

use crate::support::Project;

const LINE: &str = "Re-read your role and constitution.";

/// `ready-next` (text and JSON) of a note from owner to coder.
fn printouts(with_constitution: bool) -> (String, serde_json::Value, String) {
    let d = Project::empty();
    d.write(
        "swarm.yaml",
        "roles:\n  - name: owner\n    agent: human\n  - name: coder\n    agent: claude\n    worktree: coder\n",
    );
    if with_constitution {
        d.write("swarmforge/constitution.prompt", "Be kind.\n");
    }
    d.swarm(&["init"]).ok();
    d.send(
        "owner",
        "type: note\nto: coder\npriority: 10\nmessage: add a flag\n",
    )
    .ok();
    d.deliver_once().ok();
    let wt = d.role_dir("coder");
    let copy = d.files(&wt.join(".swarmforge/handoffs/inbox/new"));
    let stored =
        std::fs::read_to_string(wt.join(".swarmforge/handoffs/inbox/new").join(&copy[0])).unwrap();
    let json = d
        .cmd("ready-next")
        .role("coder")
        .at(&wt)
        .arg("--json")
        .run();
    json.ok();
    let v = json.json();
    d.cmd("done-current").role("coder").at(&wt).run().ok();
    d.send(
        "owner",
        "type: note\nto: coder\npriority: 10\nmessage: add a flag\n",
    )
    .ok();
    d.deliver_once().ok();
    let text = d.cmd("ready-next").role("coder").at(&wt).run();
    text.ok();
    (text.stdout.clone(), v, stored)
}

#[test]
fn a_preset_role_without_a_constitution_is_not_told_to_reread_one() {
    let (text, json, stored) = printouts(false);
    // The file keeps SwarmForge's line; the printout drops it.
    assert!(stored.contains(LINE), "{stored}");
    assert!(text.ends_with("PAYLOAD:\nadd a flag\n"), "{text}");
    assert_eq!(json["body"], "add a flag\n", "{json}");
    assert!(!text.contains(LINE));

    let (text, json, _) = printouts(true);
    assert!(
        text.ends_with(&format!("PAYLOAD:\n{LINE}\n\nadd a flag\n")),
        "{text}"
    );
    assert_eq!(json["body"], format!("{LINE}\n\nadd a flag\n"));
}
