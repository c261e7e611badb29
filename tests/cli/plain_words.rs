//! The small ones of issue 42.10: each refusal says what is wrong and where
//! to go, and the `swarm` command line means the same everywhere (`-q`,
//! `--root DIR` after any subcommand, `--help` grouped by what a person is
//! doing).

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use crate::support::*;

const NOTE: &str = "type: note\nto: coder\npriority: 50\nmessage: hi\n";

/// A draft outside the project is refused saying where drafts belong (the
/// sender's worktree, by path); both primers say it before it happens.
#[test]
fn a_draft_outside_the_project_is_refused_saying_where_drafts_belong() {
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        "wake: {method: none}\nroles:\n  - {name: coder, agent: sh x.sh}\n  - {name: boss, agent: human}\n",
    );
    p.swarm(&["init", "-q"]).ok();
    let outside = tempfile::tempdir().unwrap();
    let draft = outside.path().canonicalize().unwrap().join("draft.txt");
    std::fs::write(&draft, NOTE).unwrap();
    let r = p
        .cmd("swarm-handoff")
        .role("coder")
        .arg(&draft)
        .code(1)
        .run();
    let mut lines = r.stderr.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .ends_with("outside the project; refusing to read it."),
        "{r:?}"
    );
    assert_eq!(
        lines.next(),
        Some(
            format!(
                "  hint: drafts belong in your worktree, {}: write the draft there (not in /tmp or your home folder) and pass that path; it is deleted once queued",
                p.root.display()
            )
            .as_str()
        ),
        "{r:?}"
    );
    assert!(draft.exists(), "the draft is left where it was");

    let agent = p.swarm(&["prompt", "coder"]).ok().stdout.clone();
    assert!(
        agent.contains("Write a draft file here in your worktree (a draft outside the project, e.g. in /tmp, is refused)"),
        "{agent}"
    );
    let person = p.swarm(&["prompt", "boss"]).ok().stdout.clone();
    assert!(
        person.contains(&format!(
            "Write a draft file in {} (a draft outside the project is refused)",
            p.root.display()
        )),
        "{person}"
    );
}

/// A folder given as a draft is named a folder (a missing file keeps
/// SwarmForge's `Draft file not found`).
#[test]
fn a_folder_given_as_a_draft_is_named_a_folder() {
    let p = Project::builder().role("coder").build();
    std::fs::create_dir(p.path("drafts")).unwrap();
    p.cmd("swarm-handoff")
        .role("coder")
        .arg("drafts/")
        .code(1)
        .stdout("")
        .stderr(
            "Draft file drafts is a folder, not a file\n  hint: write the draft into a file (e.g. drafts/draft.txt) and pass that file\n",
        )
        .run();
    p.cmd("swarm-handoff")
        .role("coder")
        .arg("gone.txt")
        .code(1)
        .stderr("Draft file not found: gone.txt\n")
        .run();
}

/// `SWARMFORGE_ROLE` that is not UTF-8 is said to be so, by every agent
/// helper (unset keeps SwarmForge's `Set SWARMFORGE_ROLE.`).
#[test]
fn a_role_that_is_not_utf8_is_named_so() {
    let p = Project::builder().role("coder").build();
    p.write("draft.txt", NOTE);
    let bad = OsString::from_vec(b"cod\xffer".to_vec());
    for (helper, args) in [
        ("swarm-handoff", &["draft.txt"][..]),
        ("ready-next", &[][..]),
        ("done-current", &[][..]),
    ] {
        let r = p
            .cmd(helper)
            .env("SWARMFORGE_ROLE", bad.clone())
            .args(args)
            .code(1)
            .run();
        assert!(
            r.stderr
                .starts_with("SWARMFORGE_ROLE is not valid UTF-8 (cod"),
            "{helper}: {r:?}"
        );
        assert!(
            r.stderr.contains("set it to a role name of roles.tsv"),
            "{r:?}"
        );
        assert!(!r.stderr.contains("Set SWARMFORGE_ROLE."), "{r:?}");
    }
    assert!(p.path("draft.txt").exists());
}

/// Outside any project every agent helper prints SwarmForge's line byte for
/// byte, then a hint naming where it looked and what to do.
#[test]
fn a_helper_outside_any_project_says_where_it_looked() {
    let d = tempfile::tempdir().unwrap();
    let here = d.path().canonicalize().unwrap();
    std::fs::write(here.join("draft.txt"), NOTE).unwrap();
    for (helper, args) in [
        ("swarm-handoff", &["draft.txt"][..]),
        ("ready-next", &[][..]),
        ("done-current", &[][..]),
    ] {
        let mut c = clean_command(&bin(helper), &here);
        c.env("SWARMFORGE_ROLE", "coder").args(args);
        let r: Run = c.output().unwrap().into();
        assert_eq!(r.code, 1, "{helper}: {r:?}");
        let mut lines = r.stderr.lines();
        assert_eq!(lines.next(), Some("Cannot find SwarmForge project root"));
        let hint = lines.next().unwrap_or_default();
        assert!(
            hint.starts_with("  hint: no .swarmforge/roles.tsv in ")
                && hint.contains(&here.display().to_string())
                && hint.contains("`swarm init`"),
            "{helper}: {hint}"
        );
        assert_eq!(lines.next(), None);
    }
}

/// `-q` prints nothing on success wherever it is taken: `swarm init -q`
/// (12 lines before), `swarm down -q` (refused before).
#[test]
fn quiet_prints_nothing_on_success_on_every_command() {
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        "roles:\n  - {name: a, agent: human}\n  - {name: b, agent: sh x.sh, worktree: b}\n",
    );
    p.cmd("swarm")
        .args(["init", "-q"])
        .code(0)
        .stdout("")
        .stderr("")
        .run();
    assert!(p.path(".swarmforge/roles.tsv").is_file());
    p.cmd("swarm")
        .args(["init", "--quiet"])
        .code(0)
        .stdout("")
        .stderr("")
        .run();
    for q in ["-q", "--quiet"] {
        p.cmd("swarm")
            .args(["down", q])
            .code(0)
            .stdout("")
            .stderr("")
            .run();
    }
    p.swarm(&["down"])
        .ok()
        .stdout_has("handoffd was not running");
    p.cmd("swarm")
        .args(["archive", "--before", "2000-01-01", "-q"])
        .code(0)
        .stdout("")
        .stderr("")
        .run();
}

/// `--root DIR` after a subcommand names the project, for every kind of
/// subcommand (`swarm card list --root DIR` was refused): run from a folder
/// outside the project.
#[test]
fn root_after_any_subcommand_names_the_project() {
    let p = Project::builder()
        .role("lead")
        .config("wake: {method: none}\ncards:\n  change: [lead]\n")
        .queue_dirs()
        .build();
    let elsewhere = tempfile::tempdir().unwrap();
    let root = p.root.to_str().unwrap();
    let from_elsewhere = |args: &[&str]| {
        let mut c = clean_command(&bin("swarm"), elsewhere.path());
        c.args(args);
        let r: Run = c.output().unwrap().into();
        r
    };
    let r = from_elsewhere(&["card", "list", "--root", root]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = from_elsewhere(&["card", "new", "change", "c1", "--text", "t", "--root", root]);
    assert_eq!(r.code, 0, "{r:?}");
    r.stdout_has("CARD QUEUED: c1");
    for args in [
        &["card", "list", "--root", root][..],
        &["status", "--root", root],
        &["inbox", "--root", root],
        &["inbox", "show", "x", "--root", root],
        &["reservations", "--root", root],
        &["budget", "--root", root],
        &["session", "list", "--root", root],
    ] {
        let r = from_elsewhere(args);
        assert!(
            !r.stderr.contains("unexpected argument") && !r.stderr.contains("No swarm at"),
            "{args:?}: {r:?}"
        );
    }
    from_elsewhere(&["card", "list", "--root", root]).stdout_has("c1 (change)");
}

/// `swarm --help` groups the subcommands by what a person is doing, in
/// that order; `swarm help <cmd>` and `<cmd> --help` still show one
/// command.
#[test]
fn help_groups_the_commands_by_what_a_person_is_doing() {
    let p = Project::empty();
    let r = p.cmd("swarm").arg("--help").code(0).run();
    let headings = [
        "Set up:",
        "Run:",
        "Look:",
        "A person's work:",
        "Agents (what they run):",
        "Across hosts:",
        "Tools:",
        "Options:",
    ];
    let at: Vec<usize> = headings
        .iter()
        .map(|h| {
            r.stdout
                .lines()
                .position(|l| l == *h)
                .unwrap_or_else(|| panic!("no {h} in\n{}", r.stdout))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{}", r.stdout);
    assert!(!r.stdout.contains("\nCommands:\n"), "{}", r.stdout);
    let inbox = r
        .stdout
        .lines()
        .position(|l| l.starts_with("  inbox "))
        .unwrap();
    assert!(at[3] < inbox && inbox < at[4], "inbox is a person's work");
    let init = r
        .stdout
        .lines()
        .position(|l| l.starts_with("  init "))
        .unwrap();
    assert!(at[0] < init && init < at[1], "init is setting up");

    p.cmd("swarm")
        .args(["help", "card"])
        .code(0)
        .stdout_has("Usage: swarm card [OPTIONS] <COMMAND>")
        .run();
    p.cmd("swarm")
        .args(["inbox", "--help"])
        .code(0)
        .stdout_has("Usage: swarm inbox")
        .run();
}

/// The README's quick start pasted into an interactive zsh (the macOS
/// default shell, where `#` starts no comment unless `interactive_comments`
/// is set) runs to its end, within a deadline (it hung: a backquoted
/// `handoffd &` in a comment ran, and every trailing comment became
/// arguments).
#[test]
fn the_quick_start_pastes_into_zsh() {
    if !require_tool("zsh", "apt-get install -y zsh") {
        return;
    }
    let readme = include_str!("../../README.md");
    let block = readme
        .split("## Quick start by hand")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("\n```").next())
        .expect("the quick start's shell block");
    let p = Project::empty();
    p.write("quick-start.sh", &format!("{block}\n"));
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // -f: none of the machine's zsh start-up files; -i -s: interactive,
    // reading the paste from stdin.
    let r = p
        .cmd("sh")
        .env("PATH", path)
        .args(["-c", "zsh -f -i -s < quick-start.sh"])
        .run_within(std::time::Duration::from_secs(120));
    assert_eq!(r.code, 0, "{r:?}");
    for bad in ["command not found", "unexpected argument", "Usage:"] {
        assert!(!r.stderr.contains(bad), "{bad}: {}", r.stderr);
    }
    assert!(
        r.stdout.contains("handoffd: delivered 2, failed 0"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("handoffd: delivered 1, failed 0"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.trim_end().ends_with("NO_TASK"), "{}", r.stdout);
}
