//! `swarm trust` / `swarm untrust` (docs/agents.md, "Trusting the
//! worktrees"): the trust of exactly this swarm's worktrees, in each CLI's
//! own store, every other key and the file's mode kept; `untrust` removes
//! only what `trust` added. The real CLIs reading these entries are proved
//! in tests/cli/real_agents.rs.
//!
//! What these tests write into HOME is the person's state before the swarm
//! (a CLI onboarded once, trusts of their other projects, a disclaimer they
//! accepted in Claude Code themselves): never a trust of the swarm's own
//! worktrees, which only `swarm trust`, the command under test, writes.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use crate::support::Project;

const YAML: &str = r#"roles:
  - name: lead
    agent: claude
    worktree: master
  - name: coder
    agent: codex
    worktree: coder
  - name: reviewer
    agent: gemini
    worktree: reviewer
  - name: helper
    agent: claude
    worktree: master
  - name: owner
    agent: human
"#;

const CODEX_BEFORE: &str = "# my settings\nmodel = \"o3\" # the one I like\n\n[tui]\nscreen_reader_detection_done = true\n";

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn trust_records_exactly_the_swarms_worktrees_and_untrust_removes_only_that() {
    let d = Project::empty();
    d.write("swarm.yaml", YAML);
    d.swarm(&["init"]).ok();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let claude = h.join(".claude.json");
    let claude_before = r#"{"hasCompletedOnboarding":true,"theme":"dark","projects":{"/elsewhere":{"hasTrustDialogAccepted":true,"allowedTools":["Bash"]}}}"#;
    fs::write(&claude, claude_before).unwrap();
    fs::set_permissions(&claude, fs::Permissions::from_mode(0o600)).unwrap();
    fs::create_dir_all(h.join(".codex")).unwrap();
    let codex = h.join(".codex/config.toml");
    fs::write(&codex, CODEX_BEFORE).unwrap();
    fs::set_permissions(&codex, fs::Permissions::from_mode(0o640)).unwrap();
    let gemini = h.join(".gemini/trustedFolders.json");
    let wt = |r: &str| d.role_dir(r).canonicalize().unwrap().display().to_string();

    // The reviewer's folder was trusted by hand: left alone, and kept.
    fs::create_dir_all(h.join(".gemini")).unwrap();
    fs::write(
        &gemini,
        format!("{{\"{}\": \"TRUST_FOLDER\"}}", wt("reviewer")),
    )
    .unwrap();

    let run = |args: &[&str]| d.cmd("swarm").args(args).env("HOME", h).run();
    let r = run(&["trust", "--check"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout,
        format!(
            "untrusted: lead (claude): {}\nuntrusted: coder (codex): {}\n",
            wt("lead"),
            wt("coder")
        )
    );
    let r = run(&["trust"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = r.stdout.clone();
    assert!(
        out.contains(&format!(
            "lead (claude): {} projects[\"{}\"].hasTrustDialogAccepted: added",
            claude.display(),
            wt("lead")
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "coder (codex): {} [projects.\"{}\"] trust_level: added",
            codex.display(),
            wt("coder")
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "reviewer (gemini): {} \"{}\": already trusted, left alone",
            gemini.display(),
            wt("reviewer")
        )),
        "{out}"
    );
    // Codex's turn-end hook is trusted with the hash Codex reports; with no
    // `codex` on PATH that is said, and the rest is done.
    assert!(
        out.contains("coder (codex): ")
            && out.contains("cannot run `codex app-server`")
            && out.contains(": NOT done"),
        "{out}"
    );
    // `helper` shares lead's folder: one entry; nobody else's folder.
    assert_eq!(out.lines().count(), 4, "{out}");

    let v = json(&claude);
    assert_eq!(v["projects"][wt("lead")]["hasTrustDialogAccepted"], true);
    assert_eq!(v["theme"], "dark");
    assert_eq!(v["hasCompletedOnboarding"], true);
    assert_eq!(v["projects"]["/elsewhere"]["allowedTools"][0], "Bash");
    assert_eq!(mode(&claude), 0o600);
    let toml = fs::read_to_string(&codex).unwrap();
    assert!(toml.starts_with(CODEX_BEFORE), "{toml}");
    assert!(
        toml.contains(&format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            wt("coder")
        )),
        "{toml}"
    );
    assert_eq!(mode(&codex), 0o640);

    run(&["trust", "--check"]).ok();
    // Again: nothing changes.
    let again = run(&["trust"]);
    assert_eq!(again.code, 0);
    assert_eq!(again.stdout.matches("already trusted").count(), 3);
    assert_eq!(fs::read_to_string(&codex).unwrap(), toml);

    // Bad input: a role that is not there, or runs no such CLI.
    let r = run(&["trust", "nobody"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no role \"nobody\""), "{}", r.stderr);
    let r = run(&["trust", "owner"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("role owner runs no CLI"), "{}", r.stderr);

    let r = run(&["untrust"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.matches(": removed").count(), 2, "{}", r.stdout);
    assert_eq!(
        json(&claude),
        serde_json::from_str::<Value>(claude_before).unwrap()
    );
    assert_eq!(fs::read_to_string(&codex).unwrap(), CODEX_BEFORE);
    assert_eq!(mode(&codex), 0o640);
    // The trust given by hand stays.
    assert_eq!(json(&gemini)[wt("reviewer")], "TRUST_FOLDER");
    assert_eq!(run(&["untrust"]).stdout, "nothing to change\n");
}

#[test]
fn a_store_that_does_not_parse_is_refused_and_left_as_it_was() {
    let d = Project::empty();
    d.write("swarm.yaml", YAML);
    d.swarm(&["init"]).ok();
    let home = tempfile::tempdir().unwrap();
    let claude = home.path().join(".claude.json");
    fs::write(&claude, "{not json").unwrap();
    let r = d
        .cmd("swarm")
        .args(["trust", "lead"])
        .env("HOME", home.path())
        .run();
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains(&format!("{}: does not parse", claude.display()))
            && r.stderr.contains("nothing in it was changed"),
        "{}",
        r.stderr
    );
    assert_eq!(fs::read_to_string(&claude).unwrap(), "{not json");
    // Missing stores are created private, with only the entry.
    let r = d
        .cmd("swarm")
        .args(["trust", "reviewer"])
        .env("HOME", home.path())
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let g = home.path().join(".gemini/trustedFolders.json");
    assert_eq!(mode(&g), 0o600);
    assert_eq!(json(&g).as_object().unwrap().len(), 1);
}

/// `swarm doctor` names each worktree an agent CLI has not trusted, with
/// `swarm trust` as the fix, and is quiet about trust once it ran.
#[test]
fn doctor_names_each_untrusted_worktree_until_swarm_trust() {
    let d = Project::empty();
    d.write("swarm.yaml", YAML);
    d.swarm(&["init"]).ok();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let run = |args: &[&str]| d.cmd("swarm").args(args).env("HOME", h).run();
    let r = run(&["doctor", "--json"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let untrusted: Vec<String> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().iter())
        .filter(|f| f["code"] == "AGENT_CLI_UNTRUSTED")
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(untrusted.len(), 3, "{untrusted:?}");
    assert!(
        untrusted
            .iter()
            .any(|m| m.starts_with("role coder: codex has not trusted")),
        "{untrusted:?}"
    );
    run(&["trust"]).ok();
    let r = run(&["doctor", "--json"]);
    assert!(!r.stdout.contains("AGENT_CLI_UNTRUSTED"), "{}", r.stdout);
}

/// A Claude Code role with `permission: full` meets a bypass-permissions
/// disclaimer at its first start: `swarm trust` records the person's
/// acceptance in that worktree's `.claude/settings.local.json` only
/// (`skipDangerousModePermissionPrompt`), keeping the project's own
/// settings there; doctor and `trust --check` name it until then; `untrust`
/// removes it. A person who accepted the disclaimer in Claude Code itself
/// has the key in their user settings (Claude writes it there): then
/// nothing is missing, nothing is added, and `untrust` leaves it alone.
#[test]
fn trust_accepts_claudes_bypass_disclaimer_for_a_full_permission_role_only() {
    let d = Project::empty();
    d.write(
        "swarm.yaml",
        "roles:\n  - name: lead\n    agent: claude\n    worktree: lead\n  - name: coder\n    agent: claude\n    worktree: coder\n    permission: full\n",
    );
    d.swarm(&["init"]).ok();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let local = |r: &str| {
        d.role_dir(r)
            .canonicalize()
            .unwrap()
            .join(".claude/settings.local.json")
    };
    // The project's own local settings (not trust): kept.
    fs::create_dir_all(local("coder").parent().unwrap()).unwrap();
    fs::write(
        local("coder"),
        r#"{"permissions":{"allow":["Bash(ls:*)"]}}"#,
    )
    .unwrap();
    let run = |args: &[&str]| d.cmd("swarm").args(args).env("HOME", h).run();

    let doctor = run(&["doctor", "--json"]).stdout;
    assert_eq!(
        doctor.matches("AGENT_CLI_BYPASS_UNACCEPTED").count(),
        1,
        "{doctor}"
    );
    assert!(doctor.contains("role coder: Claude Code with `permission: full`"));
    let r = run(&["trust", "--check"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains(&format!(
            "bypass disclaimer not accepted: coder (claude, permission: full): {}\n",
            local("coder").display()
        )),
        "{}",
        r.stdout
    );

    let r = run(&["trust"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "coder (claude): {} skipDangerousModePermissionPrompt (permission: full): added",
            local("coder").display()
        )),
        "{}",
        r.stdout
    );
    // Not for the role without `permission: full`.
    assert!(!local("lead").exists());
    let v = json(&local("coder"));
    assert_eq!(v["skipDangerousModePermissionPrompt"], true);
    assert_eq!(v["permissions"]["allow"][0], "Bash(ls:*)");
    assert!(!run(&["doctor", "--json"])
        .stdout
        .contains("AGENT_CLI_BYPASS_UNACCEPTED"));
    run(&["trust", "--check"]).ok();

    let r = run(&["untrust"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(&format!(
        "coder (claude): {} skipDangerousModePermissionPrompt (permission: full): removed",
        local("coder").display()
    )));
    assert_eq!(
        json(&local("coder")),
        serde_json::json!({"permissions": {"allow": ["Bash(ls:*)"]}})
    );

    // The person accepted the disclaimer in Claude Code, which wrote it to
    // the user settings: the swarm sees it and adds nothing of its own.
    let user = h.join(".claude/settings.json");
    fs::create_dir_all(user.parent().unwrap()).unwrap();
    fs::write(&user, r#"{"skipDangerousModePermissionPrompt":true}"#).unwrap();
    assert!(!run(&["doctor", "--json"])
        .stdout
        .contains("AGENT_CLI_BYPASS_UNACCEPTED"));
    let check = run(&["trust", "--check"]).stdout;
    assert!(!check.contains("bypass disclaimer"), "{check}");
    let r = run(&["trust"]);
    assert!(
        r.stdout.contains(&format!(
            "coder (claude): {} skipDangerousModePermissionPrompt (permission: full): already trusted, left alone",
            user.display()
        )),
        "{}",
        r.stdout
    );
    assert_eq!(
        json(&local("coder"))["skipDangerousModePermissionPrompt"],
        Value::Null
    );
    run(&["untrust"]).ok();
    assert_eq!(json(&user)["skipDangerousModePermissionPrompt"], true);
}
