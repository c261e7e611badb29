//! What a new user meets first: help that names every type, errors that say
//! what is known, and no colour codes in piped output.

use crate::support::{bin, clean_command, Project, Run};

fn run_in(p: &Project, role: Option<&str>, program: &str, args: &[&str]) -> Run {
    p.run(role, program, args)
}

#[test]
fn swarm_handoff_help_documents_every_type_json_and_the_role_variable() {
    let d = tempfile::tempdir().unwrap();
    let r: Run = clean_command(&bin("swarm-handoff"), d.path())
        .arg("--help")
        .output()
        .unwrap()
        .into();
    r.ok();
    for word in [
        "--json",
        "SWARMFORGE_ROLE",
        "type: git_handoff",
        "type: note",
        "type: post",
        "type: clarify",
        "type: answer",
        "type: digest",
        "type: close",
        "Exit codes",
    ] {
        assert!(r.stdout.contains(word), "help lacks {word}:\n{}", r.stdout);
    }
    assert!(!r.stdout.contains("type: digest_request"), "daemon-only");
    // One source: the help is clap's, rendered from the command line that
    // parses the arguments and makes the man page, not a text beside it.
    let clap = swarm_handoff::cli::swarm_handoff::command()
        .render_help()
        .to_string();
    assert_eq!(r.stdout, clap);
    assert!(
        r.stdout.starts_with("Queue a draft")
            && r.stdout
                .contains("Usage: swarm-handoff [--json] <DRAFT_FILE>"),
        "{}",
        r.stdout
    );
}

#[test]
fn an_unknown_type_is_reported_alone_with_a_did_you_mean() {
    let p = Project::new(&[("coder", "task"), ("qa", "task")]);
    p.write("d.txt", "type: nte\nto: qa\npriority: 10\nmessage: m\n");
    let r = run_in(&p, Some("coder"), "swarm-handoff", &["d.txt"]);
    assert_eq!(r.code, 2, "{r:?}");
    let errors: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(
        errors,
        ["- Header 'type' must be one of git_handoff, note, post, clarify, answer, digest, close or react; got 'nte'. Did you mean 'note'?"],
        "{}",
        r.stderr
    );
    p.write("d.txt", "type: zebra\nto: qa\npriority: 10\nmessage: m\n");
    let r = run_in(&p, Some("coder"), "swarm-handoff", &["d.txt"]);
    assert!(
        !r.stderr.contains("Did you mean"),
        "no near miss: {}",
        r.stderr
    );
}

#[test]
fn an_unknown_role_lists_the_known_roles() {
    let p = Project::new(&[("coder", "task"), ("qa", "task")]);
    p.write("d.txt", "type: note\nto: qa\npriority: 10\nmessage: m\n");
    for program in ["swarm-handoff", "ready-next"] {
        let args: &[&str] = if program == "swarm-handoff" {
            &["d.txt"]
        } else {
            &[]
        };
        let r = run_in(&p, Some("ghost"), program, args);
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.contains("hint: the roles in ") && r.stderr.contains(": coder, qa"),
            "{program}: {}",
            r.stderr
        );
    }
}

#[test]
fn can_send_on_an_unknown_discussion_says_so() {
    let p = Project::new(&[("coder", "task"), ("qa", "task")]);
    let r = run_in(
        &p,
        Some("coder"),
        "swarm",
        &["can-send", "--discussion", "nope"],
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .starts_with("UNKNOWN_DISCUSSION: discussion 'nope' does not exist."),
        "{}",
        r.stderr
    );
}

#[test]
fn no_colour_codes_when_stderr_is_a_pipe() {
    // SwarmForge's launcher errors are red on a terminal only.
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::create_dir_all(root.join("swarmforge")).unwrap();
    std::fs::write(
        root.join("swarmforge/swarmforge.conf"),
        "window a claude master\n",
    )
    .unwrap();
    let r: Run = clean_command(&bin("swarm"), root)
        .arg("init")
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.starts_with("Error: "), "{}", r.stderr);
    assert!(!r.stderr.contains('\x1b'), "{:?}", r.stderr);
}
