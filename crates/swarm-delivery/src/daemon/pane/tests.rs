use super::*;

const CLAUDE_TRUST: &str = "
────────────────────────────────────────
 Accessing workspace:

 /tmp/agt/w/c

 Quick safety check: Is this a project you created or one you trust? (Like your own code, a well-known open source
 project, or work from your team). If not, take a moment to review what's in this folder first.

 Claude Code'll be able to read, edit, and execute files here.

 Security guide

 ❯ No, exit
   Yes, I trust this folder

 Enter to confirm · Esc to cancel



";

const CODEX_TRUST: &str = "
  Folder access
  /tmp/agt/w/x2

  Trust this folder? Codex can read, edit, and run files here, subject to your permission settings. Folder settings
  can run code automatically, even without a model request. Continue only if you trust these files. Your trust
  decision will be saved.

› 1. Trust and continue
  2. Back to Agent Command Center

  enter continue · esc back
";

const GEMINI_TRUST: &str = "
 Gemini CLI v0.61.0
Tips for getting started:
1. Create GEMINI.md files to customize your interactions
2. /help for more information
 ╭──────────────────────────────────────────╮
 │                                          │
 │ Do you trust the files in this folder?   │
 │                                          │
 │ ● 1. Trust folder (g)                    │
 │   2. Trust parent folder (w)             │
 │   3. Don't trust                         │
 │                                          │
 ╰──────────────────────────────────────────╯
";

#[test]
fn each_clis_trust_dialog_is_seen_with_its_options() {
    let c = classify(CLAUDE_TRUST).unwrap();
    assert_eq!(c.wait, Wait::NeedsInput);
    assert!(c.text.contains("Claude Code") && c.text.contains("trust"));
    assert_eq!(c.options[0].label, "No, exit");
    assert_eq!(c.options[0].keys, ["Enter"]);
    assert_eq!(c.options[1].label, "Yes, I trust this folder");
    assert_eq!(c.options[1].keys, ["Down", "Enter"]);
    assert_eq!(c.options.len(), 2);

    let x = classify(CODEX_TRUST).unwrap();
    assert!(x.text.contains("Codex"), "{x:?}");
    assert_eq!(x.options.len(), 2);
    assert_eq!(x.options[1].label, "2. Back to Agent Command Center");

    let g = classify(GEMINI_TRUST).unwrap();
    assert!(g.text.contains("Gemini CLI"), "{g:?}");
    assert_eq!(g.options.len(), 3);
    assert_eq!(g.options[2].keys, ["Down", "Down", "Enter"]);
}

/// Claude Code 2.1.332 started with ANTHROPIC_API_KEY set, as its pane
/// shows it (`tmux capture-pane -p`, the rule shortened).
const CLAUDE_API_KEY: &str = "
────────────────────────────────────────
  Detected a custom API key in your environment

  ANTHROPIC_API_KEY: sk-ant-...3456789-TESTKEYxyzAA

  Do you want to use this API key?

    Yes
  ❯ No (recommended)

  Enter to confirm · Esc to cancel




";

#[test]
fn claudes_api_key_dialog_offers_the_unmarked_yes_above_the_highlighted_no() {
    let p = classify(CLAUDE_API_KEY).unwrap();
    assert_eq!(p.wait, Wait::NeedsInput);
    assert!(p.text.contains("API key"), "{p:?}");
    let labels: Vec<&str> = p.options.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["Yes", "No (recommended)"]);
    assert_eq!(p.options[0].keys, ["Up", "Enter"]);
    assert_eq!(p.options[1].keys, ["Enter"]);
}

/// Claude Code 2.1.332's first start in a HOME that never ran it, as
/// its pane shows it (the welcome art above cut, the rules shortened):
/// the theme picker, no hint under it, the check on the theme in
/// effect.
const CLAUDE_THEME: &str = "
 Let's get started.

 Choose the text style that looks best with your terminal
 To change this later, run /theme

 ❯ ✔ Auto (match terminal)
     Dark mode
     Light mode
     Dark mode (colorblind-friendly)
     Light mode (colorblind-friendly)
     Dark mode (ANSI colors only)
     Light mode (ANSI colors only)

 ╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌
  1  function greet() {
  2 -  console.log(\"Hello, World!\");
  2 +  console.log(\"Hello, Claude!\");
  3  }
 ╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌
  Syntax theme: Monokai Extended (ctrl+t to disable)



";

/// The page after it.
const CLAUDE_SECURITY_NOTES: &str = "
.......█ █   █ █..........................................

 Security notes:

 1. Claude can make mistakes.
    You're responsible for Claude's actions and should always
    review them, especially when running code.

 2. Due to prompt injection risks, only use it with code you trust
    Learn more: https://code.claude.com/docs/en/security

 Press Enter to continue


";

#[test]
fn claudes_first_start_is_seen_with_every_option() {
    let p = classify(CLAUDE_THEME).unwrap();
    assert_eq!(p.wait, Wait::NeedsInput);
    assert!(
        p.text.contains("first start") && p.text.contains("theme"),
        "{p:?}"
    );
    let labels: Vec<&str> = p.options.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "Auto (match terminal)",
            "Dark mode",
            "Light mode",
            "Dark mode (colorblind-friendly)",
            "Light mode (colorblind-friendly)",
            "Dark mode (ANSI colors only)",
            "Light mode (ANSI colors only)"
        ]
    );
    assert_eq!(p.options[0].keys, ["Enter"]);
    assert_eq!(p.options[2].keys, ["Down", "Down", "Enter"]);
    // The marker moved on, the check stays on the theme in effect.
    let moved = CLAUDE_THEME
        .replace(" ❯ ✔ Auto", "   ✔ Auto")
        .replace("     Light mode\n", " ❯   Light mode\n");
    let m = classify(&moved).unwrap();
    assert_eq!(m.options.len(), 7, "{m:?}");
    assert_eq!(m.options[0].label, "Auto (match terminal)");
    assert_eq!(m.options[0].keys, ["Up", "Up", "Enter"]);
    assert_eq!(m.options[2].keys, ["Enter"]);

    let n = classify(CLAUDE_SECURITY_NOTES).unwrap();
    assert_eq!(n.wait, Wait::NeedsInput);
    assert!(n.text.contains("security notes"), "{n:?}");
    assert_eq!(n.options.len(), 1);
    assert_eq!(n.options[0].keys, ["Enter"]);
    // Those words in the agent's work, not on a page waiting: nothing.
    let worked = CLAUDE_SECURITY_NOTES.replace(
        " Press Enter to continue",
        " Press Enter to continue\n\n  wrote docs/first-start.md\n",
    );
    assert_eq!(classify(&worked), None);
    // Any tool's page that waits so.
    let other =
        classify("Some tool v9\nRead the licence first.\nPress Enter to continue\n").unwrap();
    assert_eq!(other.text, "a page waits: Press Enter to continue");
    assert_eq!(other.options[0].keys, ["Enter"]);
}

#[test]
fn codexs_hook_review_is_seen() {
    let p = classify("  Hooks need review\n  1 hook is new or changed.\n  Hooks can run outside the sandbox after you trust them.\n› 1. Review hooks\n  2. Trust all and continue\n  3. Continue without trusting (hooks won't run)\n  enter confirm · esc skip\n").unwrap();
    assert_eq!(p.text, "Codex asks to trust the swarm's turn-end hook");
    assert_eq!(p.options[1].label, "2. Trust all and continue");
    assert_eq!(p.options[1].keys, ["Down", "Enter"]);
}

#[test]
fn an_unknown_menu_is_seen_by_its_marker_and_hint() {
    let p = classify("Some tool v9\n\nPick a colour?\n❯ 1. Red\n  2. Blue\n\nEnter to confirm\n")
        .unwrap();
    assert_eq!(p.wait, Wait::NeedsInput);
    assert_eq!(p.text, "a dialog asks: Pick a colour?");
    assert_eq!(p.options.len(), 2);
}

#[test]
fn a_working_or_idle_agent_is_not_waiting() {
    for s in [
            "",
            "> \n",
            "$ ready_for_next.sh\nNO_TASK\n[swarm] the agent of role coder exited (status 0). A wake-up (Enter) runs it again; Ctrl-D closes this window.\n",
            "● Reading the file\n  ⎿ 40 lines\n\n> Try \"fix the tests\"\n  ? for shortcuts\n",
            // Rate limits discussed far above the bottom do not block.
            &format!("we should add rate limit handling\n{}", "work\n".repeat(20)),
        ] {
            assert_eq!(classify(s), None, "{s:?}");
        }
}

#[test]
fn a_rate_limit_or_auth_error_at_the_bottom_blocks() {
    let p = classify("working…\n  ⎿  API Error: 429 rate_limit_error: slow down\n> \n").unwrap();
    assert_eq!(p.wait, Wait::Blocked);
    assert!(p.text.contains("rate_limit_error"));
    let p = classify("Invalid API key · Please run /login\n").unwrap();
    assert_eq!(p.wait, Wait::Blocked);
}

/// Claude Code 2.1.332 answered 401 by the model: it retries for about
/// three minutes, the pane showing only the retry line.
const CLAUDE_401: &str = " ▐▛███▛█   Claude Code v2.1.332
▝▜██████▀  Opus 5.5 · API Usage Billing
 ▝▝   ▝▝   /tmp/dlg/proj

❯ hello

✻ 401 invalid x-api-key · retrying in 2s · attempt 4/10

────────────────────────────────────────
❯\u{a0}
────────────────────────────────────────
  ⏵⏵ auto mode on (shift+tab to cycle) · esc to interrupt
";

#[test]
fn an_auth_error_blocks_while_the_cli_still_retries() {
    let p = classify(CLAUDE_401).unwrap();
    assert_eq!(p.wait, Wait::Blocked, "{p:?}");
    // Reported once: the countdown, attempt and spinner are not its text.
    assert_eq!(p.text, "401 invalid x-api-key");
    let later = CLAUDE_401.replace("✻", "✶").replace(
        "retrying in 2s · attempt 4/10",
        "retrying in 39s · attempt 7/10",
    );
    assert_eq!(classify(&later).unwrap().text, p.text);
    // Its first attempt names no cause yet.
    let first = CLAUDE_401.replace(
        "401 invalid x-api-key · retrying in 2s · attempt 4/10",
        "401 · retrying in 1s · attempt 2/10",
    );
    assert_eq!(classify(&first).unwrap().wait, Wait::Blocked);
    // A 401 in the agent's own work is no error of its CLI.
    for s in [
        "● Fixed the 401 handling in api.rs\n> \n",
        "tests: 401 passed, 0 failed\n> \n",
    ] {
        assert_eq!(classify(s), None, "{s:?}");
    }
}

#[test]
fn control_characters_in_a_prompt_are_escaped() {
    let p = classify("Go?\x1b[31m\n❯ 1. Yes\x07\n  2. No\nEnter to confirm\n").unwrap();
    assert!(!p.text.contains('\x1b') && !p.options[0].label.contains('\x07'));
}
