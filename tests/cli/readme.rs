//! The README's quick start, pasted whole into a shell, prints what its
//! comments promise.

use crate::support::{bin_dir, clean_command, Run};

fn quick_start() -> String {
    let readme = include_str!("../../README.md");
    let section = readme
        .split("## Quick start by hand")
        .nth(1)
        .expect("a quick start section");
    let block = section.split("```sh\n").nth(1).expect("a shell block");
    block.split("\n```").next().unwrap().to_string()
}

/// What the trailing `# …` comments say will be printed: the pieces between
/// the `…`s, in order (a word like "then" joins them).
fn promises(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in script.lines() {
        let Some((cmd, said)) = line.split_once("  # ") else {
            continue;
        };
        if cmd.trim().is_empty() {
            continue;
        }
        for piece in said.split('…') {
            let piece = piece.trim().trim_start_matches("then ").trim();
            if !piece.is_empty() && piece != "then" {
                out.push(piece.to_string());
            }
        }
    }
    out
}

#[test]
fn the_quick_start_prints_what_its_comments_say() {
    let script = quick_start();
    let wanted = promises(&script);
    assert!(wanted.len() >= 8, "the comments promise output: {wanted:?}");
    let d = tempfile::tempdir().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let r: Run = clean_command(std::path::Path::new("bash"), d.path())
        .env("PATH", path)
        .args(["-e", "-c", &script])
        .output()
        .unwrap()
        .into();
    r.ok();
    let mut rest = r.stdout.as_str();
    for w in &wanted {
        match rest.find(w.as_str()) {
            Some(at) => rest = &rest[at + w.len()..],
            None => panic!(
                "the quick start did not print {w:?} (in order):\n{}",
                r.stdout
            ),
        }
    }
}
