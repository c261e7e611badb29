//! The one root resolver, in both layouts: `swarm init`'s (a `project-root`
//! pointer in each role worktree) and SwarmForge's (its launcher copies
//! `roles.tsv` into every role worktree). Every case runs in both.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{bin, clean_command, Run};

#[derive(Clone, Copy, Debug)]
enum Layout {
    Init,
    SwarmForge,
}

const LAYOUTS: [Layout; 2] = [Layout::Init, Layout::SwarmForge];

/// A project made by `swarm init` from a swarm.yaml with roles `ping` and
/// `pong` (own worktrees), `pong` allowed to send only notes; in the
/// SwarmForge layout the pointers are replaced by copies of roles.tsv.
struct Swarm {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Swarm {
    fn new(layout: Layout) -> Swarm {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::write(
            root.join("swarm.yaml"),
            "roles:\n  - name: ping\n    agent: human\n    worktree: ping\n  - name: pong\n    agent: human\n    worktree: pong\n    allowed_types: [note]\n",
        )
        .unwrap();
        let s = Swarm { _dir: dir, root };
        s.run(&s.root.clone(), None, "swarm", &["init"]).ok();
        if let Layout::SwarmForge = layout {
            for role in ["ping", "pong"] {
                let sf = s.wt(role).join(".swarmforge");
                fs::remove_file(sf.join("project-root")).unwrap();
                fs::copy(s.root.join(".swarmforge/roles.tsv"), sf.join("roles.tsv")).unwrap();
            }
        }
        s
    }

    fn wt(&self, role: &str) -> PathBuf {
        self.root.join(".worktrees").join(role)
    }

    fn run(&self, cwd: &Path, role: Option<&str>, program: &str, args: &[&str]) -> Run {
        let mut c = clean_command(&bin(program), cwd);
        if let Some(r) = role {
            c.env("SWARMFORGE_ROLE", r);
        }
        c.args(args).output().unwrap().into()
    }

    /// Writes a draft in `role`'s worktree and sends it from there.
    fn send(&self, role: &str, draft: &str) -> Run {
        let wt = self.wt(role);
        fs::write(wt.join("draft.txt"), draft).unwrap();
        self.run(&wt, Some(role), "swarm-handoff", &["draft.txt"])
    }

    fn outbox_files(&self, role: &str) -> Vec<String> {
        let dir = self.wt(role).join(".swarmforge/handoffs/outbox");
        let mut v: Vec<String> = fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".handoff"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    fn outbox_text(&self, role: &str) -> String {
        let names = self.outbox_files(role);
        assert_eq!(names.len(), 1, "one queued file: {names:?}");
        fs::read_to_string(
            self.wt(role)
                .join(".swarmforge/handoffs/outbox")
                .join(&names[0]),
        )
        .unwrap()
    }
}

#[test]
fn an_agent_in_its_worktree_sends_with_the_open_session() {
    for layout in LAYOUTS {
        let s = Swarm::new(layout);
        s.run(&s.root, None, "swarm", &["session", "start"]).ok();
        s.send("ping", "type: note\nto: pong\npriority: 50\nmessage: hi\n")
            .ok();
        let text = s.outbox_text("ping");
        assert!(
            text.lines().any(|l| l.starts_with("session: s")),
            "{layout:?}: the message carries the open session's id:\n{text}"
        );
    }
}

#[test]
fn an_agent_in_its_worktree_is_held_to_swarm_yaml() {
    for layout in LAYOUTS {
        let s = Swarm::new(layout);
        let r = s.send(
            "pong",
            "type: post\nto: ping\npriority: 50\nsubject: hi\n\nbody\n",
        );
        assert_eq!(r.code, 2, "{layout:?}: allowed_types applies: {r:?}");
        assert!(
            r.stderr
                .contains("Header 'type' must be one of note; got 'post'."),
            "{layout:?}: {r:?}"
        );
        assert!(s.outbox_files("pong").is_empty());
    }
}

#[test]
fn swarm_init_in_a_role_worktree_refuses_naming_both() {
    for layout in LAYOUTS {
        let s = Swarm::new(layout);
        let wt = s.wt("ping");
        let r = s.run(&wt, None, "swarm", &["init"]);
        assert_eq!(r.code, 1, "{layout:?}: {r:?}");
        let want = format!(
            "{} is role ping's worktree of project {}; run: swarm init {}",
            wt.display(),
            s.root.display(),
            s.root.display()
        );
        assert!(r.stderr.contains(&want), "{layout:?}: {}", r.stderr);
        assert!(!wt.join(".worktrees").exists(), "{layout:?}: nothing made");
    }
}

#[test]
fn handoffd_on_a_role_worktree_refuses_naming_the_project() {
    for layout in LAYOUTS {
        let s = Swarm::new(layout);
        let wt = s.wt("pong");
        let r = s.run(&s.root, None, "handoffd", &["--once", wt.to_str().unwrap()]);
        assert_eq!(r.code, 1, "{layout:?}: {r:?}");
        assert!(
            r.stderr.contains(&format!(
                "is role pong's worktree of project {}; run: handoffd {}",
                s.root.display(),
                s.root.display()
            )),
            "{layout:?}: {}",
            r.stderr
        );
        assert!(!wt.join(".swarmforge/daemon").exists(), "{layout:?}");
    }
}

#[test]
fn swarm_commands_in_a_role_worktree_act_on_the_project() {
    for layout in LAYOUTS {
        let s = Swarm::new(layout);
        let wt = s.wt("ping");
        let r = s.run(&wt, None, "swarm", &["down"]);
        r.ok();
        assert!(
            !wt.join(".swarmforge/daemon").exists(),
            "{layout:?}: no stray daemon folder"
        );
        let st = s.run(&wt, None, "swarm", &["status", "--json"]);
        st.ok();
        let v: serde_json::Value = serde_json::from_str(&st.stdout).unwrap();
        let text = v.to_string();
        assert!(
            text.contains("\"ping\"") && text.contains("\"pong\""),
            "{layout:?}: {text}"
        );
    }
}

/// A `--json` answer without its `now` field (two runs differ only there).
fn without_now(r: &Run) -> serde_json::Value {
    r.ok();
    let mut v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    v.as_object_mut().unwrap().remove("now");
    v
}

#[test]
fn status_from_a_subfolder_reports_on_the_project() {
    for layout in LAYOUTS {
        let s = Swarm::new(layout);
        let sub = s.root.join("src/deep");
        fs::create_dir_all(&sub).unwrap();
        let from_sub = s.run(&sub, None, "swarm", &["status", ".", "--json"]);
        let from_root = s.run(&s.root, None, "swarm", &["status", "--json"]);
        assert_eq!(
            without_now(&from_sub),
            without_now(&from_root),
            "{layout:?}"
        );
        let in_wt = s.wt("pong").join("lib");
        fs::create_dir_all(&in_wt).unwrap();
        let from_wt = s.run(&in_wt, None, "swarm", &["audit", "--json"]);
        let audit_root = s.run(&s.root, None, "swarm", &["audit", "--json"]);
        assert_eq!(
            without_now(&from_wt),
            without_now(&audit_root),
            "{layout:?}"
        );
    }
}

#[test]
fn root_is_named_one_way_everywhere_and_the_old_spelling_works() {
    let s = Swarm::new(Layout::Init);
    let elsewhere = tempfile::tempdir().unwrap();
    let root = s.root.to_str().unwrap();
    // Forum commands took --root; the others a positional root: both work now.
    for args in [
        vec!["--root", root, "status"],
        vec!["status", "--root", root],
        vec!["status", root],
        vec!["session", "list", "--root", root],
        vec!["--root", root, "session", "list"],
        vec!["audit", "--root", root],
    ] {
        let r = s.run(elsewhere.path(), None, "swarm", &args);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
    }
    let other = elsewhere.path().to_str().unwrap();
    let r = s.run(
        elsewhere.path(),
        None,
        "swarm",
        &["status", other, "--root", root],
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("two different roots"), "{}", r.stderr);
}

#[test]
fn outside_any_project_the_error_says_where_it_looked_and_how_to_make_one() {
    let d = tempfile::tempdir().unwrap();
    let here = d.path().canonicalize().unwrap();
    for args in [
        &["status"][..],
        &["transcript"],
        &["session", "list"],
        &["down"],
    ] {
        let mut c = clean_command(&bin("swarm"), &here);
        let r: Run = c.args(args).output().unwrap().into();
        assert_eq!(r.code, 1, "{args:?}: {r:?}");
        assert!(
            r.stderr
                .starts_with(&format!("No swarm at {}", here.display())),
            "{args:?}: {}",
            r.stderr
        );
        assert!(r.stderr.contains("hint: run `swarm init`"), "{}", r.stderr);
    }
    // The agent helpers keep SwarmForge's words.
    let mut c = clean_command(&bin("ready-next"), &here);
    c.env("SWARMFORGE_ROLE", "x");
    let r: Run = c.output().unwrap().into();
    assert_eq!(
        (r.code, r.stderr.lines().next()),
        (1, Some("Cannot find SwarmForge project root"))
    );
}

#[test]
fn a_sequence_past_999999_keeps_fifo_order() {
    let s = Swarm::new(Layout::Init);
    let seq = s.wt("ping").join(".swarmforge/handoffs/sequence");
    fs::create_dir_all(seq.parent().unwrap()).unwrap();
    fs::write(&seq, "999998\n").unwrap();
    for m in ["first", "second", "third"] {
        let draft = format!("type: note\nto: pong\npriority: 50\nmessage: {m}\n");
        s.send("ping", &draft).ok();
    }
    // Deliver, then hand out one by one: 999999, 1000000, 1000001 in order.
    s.run(
        &s.root,
        None,
        "handoffd",
        &["--once", s.root.to_str().unwrap()],
    )
    .ok();
    let wt = s.wt("pong");
    let mut order = Vec::new();
    for _ in 0..3 {
        let r = s.run(&wt, Some("pong"), "ready-next", &["--json"]);
        r.ok();
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        order.push(v.to_string());
        s.run(&wt, Some("pong"), "done-current", &[]).ok();
    }
    for (i, m) in ["first", "second", "third"].iter().enumerate() {
        assert!(order[i].contains(m), "item {i} should be {m}: {order:?}");
    }
}

#[test]
fn swarm_up_in_a_role_worktree_runs_the_project() {
    for layout in LAYOUTS {
        let s = Swarm::new(layout);
        let wt = s.wt("ping");
        let r = s.run(&wt, None, "swarm", &["up", "--no-tmux", "--until-idle"]);
        r.ok();
        assert!(
            r.stdout.contains(&format!(
                "its log: {}",
                s.root.join(".swarmforge/daemon/handoffd.log").display()
            )),
            "{layout:?}: the project's daemon: {}",
            r.stdout
        );
        assert!(
            !wt.join(".worktrees").exists(),
            "{layout:?}: no nested worktrees"
        );
        assert!(!wt.join(".swarmforge/daemon").exists(), "{layout:?}");
    }
}

#[test]
fn discussion_turns_are_checked_from_a_role_worktree() {
    for layout in LAYOUTS {
        let s = Swarm::new(layout);
        s.run(
            &s.root,
            Some("ping"),
            "swarm",
            &["discussion", "open", "d1", "--order", "ping,pong"],
        )
        .ok();
        let draft = "type: note\nto: ping\npriority: 50\nmessage: mine?\ndiscussion: d1\n";
        let r = s.send("pong", draft);
        assert_eq!(r.code, 2, "{layout:?}: pong spoke out of turn: {r:?}");
        assert!(
            r.stderr
                .starts_with("NOT_YOUR_TURN: discussion 'd1' expects ping to speak, got pong."),
            "{layout:?}: {}",
            r.stderr
        );
        let draft = "type: note\nto: pong\npriority: 50\nmessage: first\ndiscussion: d1\n";
        s.send("ping", draft).ok();
    }
}
