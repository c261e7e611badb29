//! Claude Code's first start met the way a person meets it (issue 42): a
//! test HOME is a HOME that never ran Claude Code, so each interactive
//! Claude Code role's pane opens with its first-start pages (the theme
//! picker, then the security notes). Nothing pre-answers them; the person
//! reads them in `swarm status` (`needs_input`, the page and its options,
//! daemon/pane.rs) and answers each with `swarm attach <role> --choose 1`,
//! the option highlighted. The answers are the CLI's to keep: done once the
//! `.claude.json` the role's CLI writes says `hasCompletedOnboarding`.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::Run;

/// The words `swarm status` gives a first-start page (daemon/pane.rs).
pub const FIRST_START: &str = "Claude Code's first start";

/// Answers the first-start pages of `roles` (interactive Claude Code in
/// tmux) through `swarm` (a `swarm` command as the person runs it), each
/// with its highlighted option, until `done(role)` says the CLI recorded
/// its onboarding and the role's pane shows no such page, or the pane
/// shows another dialog (left to the test). An answer is
/// given only to a page `swarm status` shows, and the next only once
/// status has moved past it (its report can lag the pane, and a second
/// Enter would answer the dialog after it). Panics after `within`,
/// with the last status.
pub fn answer_first_start(
    swarm: &dyn Fn(&[&str]) -> Run,
    roles: &[String],
    done: &dyn Fn(&str) -> bool,
    within: Duration,
) {
    let end = Instant::now() + within;
    let mut answered: Vec<(String, String)> = Vec::new();
    let mut pending: Vec<&String> = roles.iter().collect();
    let mut pause = Duration::from_millis(20);
    let mut last = Value::Null;
    while !pending.is_empty() {
        assert!(
            Instant::now() < end,
            "timed out after {within:?} answering Claude Code's first start of {pending:?}; last status:\n{last:#}"
        );
        let st = swarm(&["status", "--json"]);
        last = serde_json::from_str(st.stdout.trim()).unwrap_or(Value::Null);
        let mut still = Vec::new();
        for role in pending {
            let prompt = last["roles"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["role"] == role.as_str())
                .and_then(|r| r["agent_prompt"].as_str())
                .unwrap_or("")
                .to_string();
            let page = prompt.starts_with(FIRST_START);
            let seen = answered
                .iter()
                .any(|(r, p)| r == role.as_str() && *p == prompt);
            if page && !seen {
                let r = swarm(&["attach", role, "--choose", "1"]);
                assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
                answered.push((role.clone(), prompt));
                still.push(role);
            } else if page || (prompt.is_empty() && !done(role)) {
                // Status not past the page answered yet; or the CLI not yet
                // drawing its first page, or between two.
                still.push(role);
            }
            // Else done; or another dialog, which the test meets itself.
        }
        pending = still;
        if !pending.is_empty() {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }
}

/// Whether the `.claude.json` at `file` records Claude Code's onboarding.
pub fn onboarded(file: &std::path::Path) -> bool {
    std::fs::read(file)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .is_some_and(|v| v["hasCompletedOnboarding"] == true)
}
