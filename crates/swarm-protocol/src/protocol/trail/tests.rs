use super::*;
use crate::protocol::header::Header;
use crate::protocol::layout::Worktree;

#[test]
fn completions_read_each_new_copy_once_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let project = Project::new(dir.path());
    let wt = dir.path().join("wt");
    std::fs::create_dir_all(project.swarmforge()).unwrap();
    std::fs::write(
        project.roles_tsv(),
        format!("b\tb\t{}\tswarmforge-b\tB\tcodex\ttask\n", wt.display()),
    )
    .unwrap();
    let done = Worktree::new(&wt).completed();
    std::fs::create_dir_all(&done).unwrap();
    let copy = |n: u32| {
        let id = format!("20261202T100703Z_00000{n}_from_a");
        std::fs::write(
                done.join(format!("20_{id}_to_b.handoff")),
                format!("id: {id}\nfrom: a\nto: b\npriority: 20\ntype: note\nmessage: m\nrecipient: b\ncompleted_at: 2026-12-02T10:07:03.023948Z\n\nbody\n"),
            )
            .unwrap();
    };
    copy(1);
    let mut c = Completions::start(&project);
    assert_eq!(c.reads, 0, "what was completed before is history");
    copy(2);
    let got = c.look(&project).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].0.id.as_deref(),
        Some("20261202T100703Z_000002_from_a")
    );
    assert_eq!(got[0].1.get(Header::Message), Some("m"));
    // Looked at again (the folder changed just now: listed again),
    // nothing new is read.
    for _ in 0..3 {
        assert!(c.look(&project).unwrap().is_empty());
    }
    assert_eq!(c.reads, 1);
    copy(3);
    assert_eq!(c.look(&project).unwrap().len(), 1);
    assert_eq!(c.reads, 2);
}
