//! `swarm init --example` never destroys a file of the user's (issue 42.6):
//! it refuses, naming every file it would replace, and writes nothing.

use crate::support::*;

/// A repository with a tracked `tasks.txt` and an untracked README.md (the
/// user's only copy): `--example pipeline` (which brings both) refuses with
/// exit 1, naming both, and writes nothing; the files keep their bytes.
/// Once they are moved away it writes the example.
#[test]
fn init_example_refuses_to_replace_the_users_files_and_names_each() {
    let p = Project::empty();
    git(&p.root, &["init", "-q", "-b", "master"]);
    p.write("tasks.txt", "my tasks\n");
    git(&p.root, &["add", "tasks.txt"]);
    git(
        &p.root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "mine",
        ],
    );
    p.write("README.md", "my only copy\n");
    let before = snapshot(&p.root);

    for example in ["pipeline", "trio"] {
        let r = p
            .cmd("swarm")
            .args(["init", "--example", example])
            .code(1)
            .stdout("")
            .stderr_has(&format!("{} already exists", p.path("README.md").display()))
            .stderr_has("wrote nothing")
            .run();
        if example == "pipeline" {
            r.stderr_has(&format!("{} already exists", p.path("tasks.txt").display()))
                .stderr_has("would replace 2 of your files");
        }
        assert_eq!(snapshot(&p.root), before, "{example}: nothing written");
    }
    assert_eq!(p.read("README.md"), "my only copy\n");
    assert_eq!(p.read("tasks.txt"), "my tasks\n");
    assert!(!p.path("swarm.yaml").exists() && !p.path("agents").exists());

    // A file where the example needs a folder is named too.
    p.write("agents", "not a folder\n");
    p.cmd("swarm")
        .args(["init", "--example", "pipeline"])
        .code(1)
        .stderr_has(&format!("{} is in the way", p.path("agents").display()))
        .run();
    std::fs::remove_file(p.path("agents")).unwrap();

    // Moved away: the example is written.
    std::fs::rename(p.path("README.md"), p.path("README.mine")).unwrap();
    git(&p.root, &["mv", "tasks.txt", "tasks.mine"]);
    p.swarm(&["init", "--example", "pipeline", "-q"]).ok();
    assert!(p.path("swarm.yaml").is_file() && p.path("agents/coder.sh").is_file());
    assert_eq!(p.read("README.mine"), "my only copy\n");
}
