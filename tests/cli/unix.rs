//! Issue 17, "a good Unix citizen": completions, man pages, one JSON
//! convention, terminal manners and bounded logs.

use std::fs;
use std::process::Command;

use crate::support::*;

const BINARIES: [&str; 5] = [
    "swarm",
    "swarm-handoff",
    "ready-next",
    "done-current",
    "handoffd",
];

/// Runs `shell -c script` and returns (success, stdout + stderr).
fn shell(shell: &str, script: &str) -> (bool, String) {
    let o = Command::new(shell).arg("-c").arg(script).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

#[test]
fn bash_loads_the_completions_of_every_binary() {
    let p = Project::empty();
    let script = p.cmd("swarm").args(["completions", "bash"]).run();
    script.ok();
    let file = p.write("swarm.bash", &script.stdout);
    let (ok, out) = shell(
        "bash",
        &format!("set -e; source '{}'; complete -p", file.display()),
    );
    assert!(ok, "{out}");
    for b in BINARIES {
        assert!(
            out.contains(&format!(" {b}\n")),
            "no completion for {b}:\n{out}"
        );
    }
    // Subcommands come from the clap definitions.
    assert!(script.stdout.contains("transcript"));
    assert!(script.stdout.contains("completions"));
}

#[test]
fn zsh_loads_the_completions_of_every_binary() {
    if !require_tool("zsh", "apt-get install -y zsh") {
        return;
    }
    let p = Project::empty();
    let all = p.cmd("swarm").args(["completions", "zsh"]).run();
    all.ok();
    let file = p.write("all.zsh", &all.stdout);
    let (ok, out) = shell(
        "zsh",
        &format!(
            "autoload -U compinit && compinit -u -d '{}' && source '{}' && \
             for b in {}; do print -r -- \"$b=$_comps[$b]\"; done",
            p.root.join("zcompdump").display(),
            file.display(),
            BINARIES.join(" ")
        ),
    );
    assert!(ok, "{out}");
    for b in BINARIES {
        let f = format!("_{b}");
        assert!(out.contains(&format!("{b}={f}\n")), "{b} not bound:\n{out}");
    }
    // --bin: one binary's script, the fpath form.
    let one = p
        .cmd("swarm")
        .args(["completions", "zsh", "--bin", "ready-next"])
        .run();
    one.ok();
    assert!(
        one.stdout.starts_with("#compdef ready-next"),
        "{}",
        one.stdout
    );
    assert!(!one.stdout.contains("_swarm()"));
    p.cmd("swarm")
        .args(["completions", "zsh", "--bin", "nope"])
        .code(1)
        .stderr_has("no binary named 'nope'")
        .run();
}

#[test]
fn fish_completions_parse_when_fish_is_there() {
    let p = Project::empty();
    let script = p.cmd("swarm").args(["completions", "fish"]).run();
    script.ok();
    assert!(script.stdout.contains("complete -c done-current"));
    // fish is not in CI's tool list: checked when present only.
    if Command::new("fish").arg("--version").output().is_ok() {
        let file = p.write("swarm.fish", &script.stdout);
        let (ok, out) = shell("fish", &format!("source '{}'", file.display()));
        assert!(ok, "{out}");
    }
}

/// Terminal text without overstrike (`N\bN` bold, `_\bx` underline).
fn plain(s: &str) -> String {
    let mut out: Vec<char> = Vec::new();
    for c in s.chars() {
        if c == '\u{8}' {
            out.pop();
        } else {
            out.push(c);
        }
    }
    out.into_iter().collect()
}

#[test]
fn man_pages_for_every_binary_and_subcommand_render() {
    if !require_tool("man", "apt-get install -y man-db") {
        return;
    }
    let p = Project::empty();
    let dir = p.root.join("man/man1");
    let r = p.cmd("swarm").arg("man").arg(&dir).run();
    r.ok();
    let names = files(&dir);
    for b in BINARIES {
        assert!(names.contains(&format!("{b}.1")), "{names:?}");
    }
    for sub in [
        "swarm-transcript.1",
        "swarm-events.1",
        "swarm-session-start.1",
        "swarm-man.1",
    ] {
        assert!(names.contains(&sub.to_string()), "{names:?}");
    }
    assert_eq!(r.stdout.lines().count(), names.len());
    for name in &names {
        let o = Command::new("man")
            .arg("-l")
            .arg(dir.join(name))
            .env("MANWIDTH", "80")
            .env("MAN_KEEP_FORMATTING", "0")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .output()
            .unwrap();
        let text = plain(&String::from_utf8_lossy(&o.stdout));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {err}");
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{name}:\n{text}"
        );
        assert!(!err.contains("warning"), "{name}: {err}");
    }
    let page = fs::read_to_string(dir.join("swarm-events.1")).unwrap();
    assert!(page.contains("with\\-offset"), "{page}");
}
