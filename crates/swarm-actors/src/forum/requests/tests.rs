use super::carry::{carry_out, take};
use super::*;
use crate::protocol::launch_files::taken_requests_dir;

fn roles() -> Roles {
    Roles::parse("a\tm\t/p\ts\tA\tx\ttask\nb\tm\t/p\ts\tB\tx\ttask\n")
}

/// A request carried out, then again as after a daemon kill before the
/// taken file was removed: one session, one answer naming it; the
/// sender is the folder's role.
#[test]
fn a_request_is_carried_out_once_and_answered() {
    let d = tempfile::tempdir().unwrap();
    let p = Project::new(d.path());
    let roles = roles();
    let dir = agent_requests_dir(&p, "a");
    fsx::ensure_dirs(&[&dir]).unwrap();
    let ask = Ask::SessionStart {
        title: Some("t".into()),
    };
    let id = "00000000000000aa";
    let mut m = ask.to_message();
    m.push_named("started_by", "b");
    std::fs::write(dir.join(format!("{id}.request")), m.render()).unwrap();
    assert_eq!(serve(&p, &roles), 1);
    let s = session::current(&p).unwrap().unwrap();
    assert_eq!(s.started_by, "a");
    // Killed before the taken request was removed: carried out again.
    let taken = taken_requests_dir(&p, "a").join(format!("{id}.request"));
    std::fs::write(&taken, ask.to_message().render()).unwrap();
    resume(&p, &roles);
    assert_eq!(session::list(&p).unwrap().len(), 1);
    let a = std::fs::read_to_string(dir.join(format!("{id}.answer"))).unwrap();
    assert!(a.contains(&format!("record: {}", s.id)), "{a}");
    assert!(!taken.exists());
    // A malformed one is answered, not carried out.
    std::fs::write(dir.join("00000000000000bb.request"), "op: rm -rf\n\n").unwrap();
    serve(&p, &roles);
    let a = std::fs::read_to_string(dir.join("00000000000000bb.answer")).unwrap();
    assert!(a.contains("unknown request"), "{a}");
}

/// The agent swaps its requests folder for a symlink to a folder
/// outside between the daemon's open and its move: the held folder's
/// request is taken and answered there; the outside folder's files are
/// neither moved, nor removed, nor written.
#[test]
fn a_requests_folder_swapped_for_a_symlink_after_the_open_moves_nothing_outside() {
    let d = tempfile::tempdir().unwrap();
    let p = Project::new(d.path().join("p"));
    let roles = roles();
    let dir = agent_requests_dir(&p, "a");
    fsx::ensure_dirs(&[&dir]).unwrap();
    let id = "00000000000000aa";
    let name = format!("{id}.request");
    let ask = Ask::SessionStart { title: None }.to_message().render();
    std::fs::write(dir.join(&name), &ask).unwrap();
    let outside = d.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let secret = "op: session_start\n\nthe person's file\n";
    std::fs::write(outside.join(&name), secret).unwrap();
    std::fs::write(outside.join("big.request"), "x").unwrap();

    let held = fsx::HeldDir::open(&dir).unwrap();
    let aside = d.path().join("aside");
    std::fs::rename(&dir, &aside).unwrap();
    std::os::unix::fs::symlink(&outside, &dir).unwrap();

    assert!(take(&p, &held, "a", id).unwrap());
    let taken = taken_requests_dir(&p, "a").join(&name);
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), ask);
    assert_eq!(
        std::fs::read_to_string(outside.join(&name)).unwrap(),
        secret
    );
    // The answer is refused through the symlink (it is published only
    // into a folder opened without following one).
    assert!(carry_out(&p, &roles, "a", id).is_err());
    let mut left: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["00000000000000aa.request", "big.request"]);
    // And a daemon's poll skips the symlinked folder.
    assert_eq!(serve(&p, &roles), 0);
    assert_eq!(
        std::fs::read_to_string(outside.join(&name)).unwrap(),
        secret
    );
}

#[test]
fn asks_round_trip() {
    for ask in [
        Ask::SessionStart { title: None },
        Ask::SessionClose {
            id: Some("s1".into()),
            reason: "r".into(),
        },
        Ask::DiscussionOpen {
            id: "d".into(),
            order: vec!["a".into(), "b".into()],
            max_turns: Some(3),
        },
        Ask::DiscussionClose {
            id: "d".into(),
            reason: "r".into(),
        },
        Ask::AuditCount { task: "c".into() },
        Ask::Reserve {
            globs: vec!["src/**".into(), "a b.txt".into()],
            ttl_ms: 90_000,
            reason: " why: not ".into(),
            force: true,
        },
        Ask::Release { globs: vec![] },
        Ask::Release {
            globs: vec!["src/**".into()],
        },
    ] {
        assert_eq!(Ask::of(&ask.to_message()), Ok(ask));
    }
}

fn plant(p: &Project, role: &str, id: &str, text: &str) {
    let dir = agent_requests_dir(p, role);
    fsx::ensure_dirs(&[&dir]).unwrap();
    std::fs::write(dir.join(format!("{id}.request")), text).unwrap();
}

fn answer(p: &Project, role: &str, id: &str) -> String {
    let f = agent_requests_dir(p, role).join(format!("{id}.answer"));
    let a = std::fs::read_to_string(&f).unwrap();
    std::fs::remove_file(&f).unwrap();
    a
}

fn held(p: &Project) -> Vec<(String, Vec<String>)> {
    reservations::active(p)
        .unwrap()
        .into_iter()
        .map(|r| (r.role, r.globs))
        .collect()
}

/// A reservation request is taken in the folder's role's name, and a
/// request naming another role is refused (the role is the folder's);
/// carried out again after a kill, it is answered from the reservation
/// it made, which stays the only one.
#[test]
fn a_reservation_request_is_the_folders_roles_and_carried_out_once() {
    let d = tempfile::tempdir().unwrap();
    let p = Project::new(d.path());
    let roles = roles();
    let id = "00000000000000a1";
    let ask = Ask::Reserve {
        globs: vec!["src/**".into()],
        ttl_ms: 3_600_000,
        reason: "r".into(),
        force: false,
    };
    plant(&p, "a", id, &ask.to_message().render());
    assert_eq!(serve(&p, &roles), 1);
    let a = answer(&p, "a", id);
    assert!(a.starts_with("outcome: done\n"), "{a}");
    assert_eq!(held(&p), [("a".to_string(), vec!["src/**".to_string()])]);
    // Taken up again (killed before the taken request was removed).
    let taken = taken_requests_dir(&p, "a").join(format!("{id}.request"));
    std::fs::write(&taken, ask.to_message().render()).unwrap();
    resume(&p, &roles);
    assert!(answer(&p, "a", id).contains("\"role\":\"a\""));
    assert_eq!(held(&p).len(), 1);
    // The same glob asked for by b overlaps a's: RESERVED.
    plant(&p, "b", id, &ask.to_message().render());
    serve(&p, &roles);
    let a = answer(&p, "b", id);
    assert!(
        a.contains("token: RESERVED") && a.contains("src/** overlaps src/**: a holds src/**"),
        "{a}"
    );
    // Forged: a role named in the request, in b's folder.
    for (n, forged) in [
        "op: reserve\nforce: true\nreason: x\nrole: a\nttl_ms: 1000\n\nlib/**\n",
        "op: release\nrole: a\n\nsrc/**\n",
        "op: release\nas: a\n\n",
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("00000000000000b{n}");
        plant(&p, "b", &id, forged);
        serve(&p, &roles);
        let a = answer(&p, "b", &id);
        assert!(a.contains("is not a field of this request"), "{a}");
    }
    // b releasing src/** holds none of it.
    plant(&p, "b", "00000000000000c1", "op: release\n\nsrc/**\n");
    serve(&p, &roles);
    let a = answer(&p, "b", "00000000000000c1");
    assert!(
        a.contains("token: NOT_RESERVED") && a.contains("b holds no reservation of src/**"),
        "{a}"
    );
    assert_eq!(held(&p), [("a".to_string(), vec!["src/**".to_string()])]);
}

/// Globs, the time to live and the flags are checked as `reserve`
/// checks them; anything else is answered refused, nothing written.
#[test]
fn a_malformed_reservation_request_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = Project::new(d.path());
    let roles = roles();
    let many: String = (0..65).map(|i| format!("f{i}\n")).collect();
    for (n, (text, why)) in [
        (
            "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\n../x\n",
            "escapes the project",
        ),
        (
            "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\n.git/config\n",
            ".git is not a file",
        ),
        (
            "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\n/etc/x\n",
            "not a normalised",
        ),
        (
            "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\nsrc/./x\n",
            "not a normalised",
        ),
        (
            "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\na\tb\n",
            "control characters",
        ),
        (
            "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\n\n",
            "empty",
        ),
        (
            "op: reserve\nforce: false\nreason: x\nttl_ms: 1000\n\n",
            "names no glob",
        ),
        (
            "op: reserve\nforce: false\nreason: x\nttl_ms: 0\n\nx\n",
            "ttl_ms must be",
        ),
        (
            "op: reserve\nforce: false\nreason: x\nttl_ms: 99999999999999\n\nx\n",
            "ttl_ms must be",
        ),
        (
            "op: reserve\nforce: yes\nreason: x\nttl_ms: 1000\n\nx\n",
            "force is neither",
        ),
        (
            "op: reserve\nforce: false\nttl_ms: 1000\n\nx\n",
            "without 'reason'",
        ),
        ("op: release\n\nx", "do not end with a new line"),
        (&format!("op: release\n\n{many}"), "more than 64 globs"),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("00000000000000d{n:x}");
        plant(&p, "a", &id, text);
        serve(&p, &roles);
        let a = answer(&p, "a", &id);
        assert!(
            a.contains("outcome: refused") && a.contains(why),
            "{text:?}: {a}"
        );
    }
    // A reason the command line refuses: the same refusal.
    plant(
        &p,
        "a",
        "00000000000000e1",
        &format!(
            "op: reserve\nforce: false\nreason: {}\nttl_ms: 1000\n\nx\n",
            "x".repeat(201)
        ),
    );
    serve(&p, &roles);
    assert!(answer(&p, "a", "00000000000000e1").contains("--reason must be one line"));
    assert!(held(&p).is_empty());
}

/// A release carried out, then again as after a daemon kill before the
/// taken request was removed: the mark says what it released, which is
/// the answer again, and nothing more is released (a reservation made
/// in between stays).
#[test]
fn a_release_request_is_carried_out_once() {
    let d = tempfile::tempdir().unwrap();
    let p = Project::new(d.path());
    let roles = roles();
    let take = |globs: &[&str]| {
        reservations::reserve(
            &p,
            &reservations::Request {
                role: "a",
                globs: globs.iter().map(|g| g.to_string()).collect(),
                ttl: Duration::from_secs(600),
                reason: "",
                worktree: d.path(),
                force: false,
            },
        )
        .unwrap()
    };
    take(&["src/**", "docs/**"]);
    let id = "00000000000000f1";
    let ask = Ask::Release { globs: vec![] }.to_message().render();
    plant(&p, "a", id, &ask);
    // Killed after the release, before the request was removed: the
    // request and its mark are left in the daemon's folder.
    let dir = agent_requests_dir(&p, "a");
    let held_dir = fsx::HeldDir::open(&dir).unwrap();
    assert!(take_for_test(&p, &held_dir, id));
    let taken = taken_requests_dir(&p, "a");
    let mark = taken.join(format!("{id}.before"));
    let gone = reservations::release_once(&p, "a", &[], &mark).unwrap();
    assert_eq!(gone, ["src/**", "docs/**"]);
    assert!(held(&p).is_empty());
    take(&["lib/**"]);
    resume(&p, &roles);
    let a = answer(&p, "a", id);
    assert!(a.contains(r#"{"released":["src/**","docs/**"]}"#), "{a}");
    assert_eq!(held(&p), [("a".to_string(), vec!["lib/**".to_string()])]);
    assert!(!mark.exists() && !taken.join(format!("{id}.request")).exists());
}

fn take_for_test(p: &Project, held: &fsx::HeldDir, id: &str) -> bool {
    take(p, held, "a", id).unwrap()
}
