//! What an agent's tmux pane shows when the agent waits for a person
//! (docs/agents.md, "When an agent waits for a person"): a dialog, a menu, a
//! permission request or a login prompt (`needs_input`), or a rate-limit or
//! authentication error (`blocked`). Read from the pane's visible text only.
//!
//! The invariant this module keeps for the rest of the toolkit: a pane that
//! [`classify`] recognises is never typed into by a wake-up (daemon/wake.rs);
//! a person answers it (`swarm attach <role>`), and the daemon reports it
//! once per prompt (`needs_input` / `blocked` in the journal and to
//! `notify.command`).
//!
//! Known prompts are matched by their own words (a table per CLI, written
//! against the pinned CLIs of tests/cli/real_agents.rs); anything else that
//! looks like a menu (a selection marker on a numbered or listed option and
//! a confirm hint) counts too, and so does a page whose bottom line says
//! "Press Enter to continue" (its one option: Enter), so a new dialog of a
//! new CLI version is still seen. A false alarm costs a held wake-up and a notification; typing into
//! a dialog can answer it wrongly (Claude Code's trust dialog is answered
//! "No, exit" by an Enter).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::daemon::journal::{Event, Journal, Kind};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::Project;
use crate::sys::tmux::TmuxError;

/// What kind of wait the pane shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Wait {
    /// A dialog, menu, permission request or login prompt.
    NeedsInput,
    /// A rate limit or an authentication error.
    Blocked,
}

impl Wait {
    pub fn word(self) -> &'static str {
        match self {
            Wait::NeedsInput => "needs_input",
            Wait::Blocked => "blocked",
        }
    }
}

/// One option of a recognised menu, and the exact keys that choose it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Choice {
    pub label: String,
    /// tmux key names (`send-keys` without `-l`): arrows from the
    /// highlighted option, then Enter.
    pub keys: Vec<String>,
}

/// What the pane waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Prompt {
    pub wait: Wait,
    /// The prompt's own words (one line, control characters escaped).
    pub text: String,
    /// The options of a menu, when they could be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<Choice>,
}

/// Known prompts: words on screen, and what they mean.
const NEEDS_INPUT: &[(&str, &str)] = &[
    // Claude Code's first start in a HOME that never ran it (its onboarding,
    // kept as `hasCompletedOnboarding` once the security notes are passed).
    (
        "Choose the text style that looks best with your terminal",
        "Claude Code's first start asks for a text style (its theme; /theme changes it later)",
    ),
    (
        "Security notes:",
        "Claude Code's first start shows its security notes and waits for Enter",
    ),
    // Claude Code
    (
        "Is this a project you created or one you trust?",
        "Claude Code asks whether to trust this folder (swarm trust)",
    ),
    (
        "Yes, I trust these settings",
        "Claude Code asks whether to trust this folder's settings",
    ),
    (
        "New MCP server found in",
        "Claude Code asks whether to use a project MCP server",
    ),
    ("Select login method", "Claude Code asks to log in"),
    (
        "Detected a custom API key",
        "Claude Code asks whether to use the API key in ANTHROPIC_API_KEY (swarm trust)",
    ),
    (
        "Do you want to proceed?",
        "Claude Code asks permission for a tool",
    ),
    (
        "Do you want to make this edit",
        "Claude Code asks permission for an edit",
    ),
    (
        "Do you want to create",
        "Claude Code asks permission to create a file",
    ),
    // Codex
    (
        "Trust this folder? Codex can",
        "Codex asks whether to trust this folder (swarm trust)",
    ),
    (
        "Do you trust the contents of this directory?",
        "Codex asks whether to trust this folder (swarm trust)",
    ),
    ("Sign in with ChatGPT", "Codex asks to sign in"),
    (
        "Would you like to run the following command?",
        "Codex asks permission to run a command",
    ),
    (
        "Would you like to make the following edits?",
        "Codex asks permission for an edit",
    ),
    (
        "hook needs review before it can run",
        "Codex asks to review its hooks",
    ),
    (
        "Hooks need review",
        "Codex asks to trust the swarm's turn-end hook",
    ),
    (
        "Allow the swarm MCP server to run tool",
        "Codex asks permission for a swarm tool",
    ),
    // Gemini CLI
    (
        "Do you trust the files in this folder?",
        "Gemini CLI asks whether to trust this folder (swarm trust)",
    ),
    (
        "Do you trust this folder?",
        "Gemini CLI asks whether to trust this folder (swarm trust)",
    ),
    (
        "How would you like to authenticate",
        "Gemini CLI asks to log in",
    ),
    (
        "Allow execution of",
        "Gemini CLI asks permission to run a command",
    ),
    (
        "Apply this change?",
        "Gemini CLI asks permission for an edit",
    ),
];

/// Signs of a rate limit or an authentication error, lower case, looked
/// for in the last lines only (an agent may well discuss rate limits in its
/// work).
const BLOCKED: &[&str] = &[
    "usage limit reached",
    "hit your usage limit",
    "rate limit",
    "rate_limit_error",
    "quota exceeded",
    "resource_exhausted",
    "invalid api key",
    "please run /login",
    "authentication_error",
    "credit balance is too low",
    // Claude Code retrying a 401 shows `401 invalid x-api-key · retrying in
    // 2s · attempt 4/10` for about three minutes (see [`auth_error`]).
    "invalid x-api-key",
    "invalid bearer token",
    "oauth token has expired",
];

/// An HTTP 401 or 403 the CLI reports, perhaps while it retries (Claude
/// Code: `✻ 401 invalid x-api-key · retrying in 2s · attempt 4/10`; its
/// first attempt says only `API error · retrying`): the status code as a
/// word of its own on a line that says "retrying" or "api error". A wrong
/// key does not heal by retrying, so the pane is blocked from the first
/// 401 on, not once the retries are spent.
fn auth_error(lower: &str) -> bool {
    let coded = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w == "401" || w == "403");
    coded && (lower.contains("retrying") || lower.contains("api error"))
}

/// Lines from the bottom that may hold a dialog's marker and hint.
const TAIL: usize = 30;
/// Lines from the bottom looked at for a blocking error.
const ERROR_TAIL: usize = 8;

/// Selection markers the CLIs draw before the highlighted option.
const MARKERS: &[char] = &['❯', '›', '>', '●', '▶', '→'];

/// Marks of the option now in effect, drawn between the selection marker
/// and the label (Claude Code's theme picker: `❯ ✔ Auto (match terminal)`,
/// the check staying on it while the marker moves).
const CHECKS: &[char] = &['✔', '✓'];

/// The bottom line of a page that waits for Enter alone, no option on it
/// (Claude Code's first-start security notes), lower case.
const PAGE_HINT: &str = "press enter to continue";

/// Confirm hints under a menu, lower case.
const HINTS: &[&str] = &[
    "enter to confirm",
    "enter continue",
    "enter confirm",
    "press enter",
    "esc to cancel",
    "(y/n)",
    "[y/n]",
    "enter to select",
    "use arrow keys",
];

/// Box edges drawn at a line's start or end.
const EDGES: &[char] = &['│', '┃', '║'];

/// The last `n` non-empty lines of the screen, without box-drawing edges,
/// each with the column its option label would start at ([`label_col`]).
fn tail(screen: &str, n: usize) -> Vec<(String, usize)> {
    let lines: Vec<(String, usize)> = screen
        .lines()
        .map(|l| {
            let text = l.trim().trim_matches(EDGES).trim().to_string();
            (text, label_col(l))
        })
        .filter(|(l, _)| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// Where the words of a raw screen line start, in characters, past its
/// indent, a box edge and a selection marker: the options of one menu
/// line up there, the highlighted one and the others alike (Claude Code's
/// API-key dialog: `    Yes` over `  ❯ No (recommended)`).
fn label_col(raw: &str) -> usize {
    let mut col = 0;
    let mut chars = raw.chars().peekable();
    let mut skip = |chars: &mut std::iter::Peekable<std::str::Chars>, f: &dyn Fn(char) -> bool| {
        while chars.peek().is_some_and(|c| f(*c)) {
            chars.next();
            col += 1;
        }
    };
    skip(&mut chars, &|c| c.is_whitespace());
    skip(&mut chars, &|c| EDGES.contains(&c));
    skip(&mut chars, &|c| c.is_whitespace());
    skip(&mut chars, &|c| MARKERS.contains(&c));
    skip(&mut chars, &|c| c.is_whitespace());
    skip(&mut chars, &|c| CHECKS.contains(&c));
    skip(&mut chars, &|c| c.is_whitespace());
    col
}

/// An option's words without the check of the option in effect.
fn unchecked(line: &str) -> &str {
    line.trim_start_matches(CHECKS).trim_start()
}

/// A highlighted option: a marker, then the option (maybe numbered).
fn marked(line: &str) -> Option<&str> {
    let rest = line.strip_prefix(MARKERS)?;
    let rest = unchecked(rest.trim_start());
    (!rest.is_empty() && rest.chars().next().is_some_and(|c| c.is_alphanumeric())).then_some(rest)
}

/// `N. label` → (N, label).
fn numbered(line: &str) -> Option<(u32, &str)> {
    let (n, rest) = line.split_once(". ")?;
    let n: u32 = n.trim().parse().ok()?;
    Some((n, rest.trim()))
}

/// The menu around the highlighted line: its options and the keys to each.
fn options(lines: &[(String, usize)], at: usize) -> Vec<Choice> {
    let label = |l: &str| unchecked(marked(l).unwrap_or(l)).trim().to_string();
    let is_option = |l: &str| {
        let l = marked(l).unwrap_or(l);
        numbered(l).is_some()
    };
    let numbered_menu = numbered(marked(&lines[at].0).unwrap_or("")).is_some();
    let (mut first, mut last) = (at, at);
    if numbered_menu {
        while first > 0 && is_option(&lines[first - 1].0) {
            first -= 1;
        }
        while last + 1 < lines.len() && is_option(&lines[last + 1].0) {
            last += 1;
        }
    } else {
        // Unnumbered (Claude Code's trust and API-key dialogs): the short
        // lines next to the highlighted one, above and below, whose words
        // start in its column; not a hint.
        let col = lines[at].1;
        let same = |(l, c): &(String, usize)| {
            let lower = l.to_lowercase();
            *c == col && l.chars().count() <= 60 && !HINTS.iter().any(|h| lower.contains(h))
        };
        while first > 0 && same(&lines[first - 1]) {
            first -= 1;
        }
        while last + 1 < lines.len() && same(&lines[last + 1]) {
            last += 1;
        }
    }
    (first..=last)
        .map(|i| {
            let moves = i as isize - at as isize;
            let key = if moves < 0 { "Up" } else { "Down" };
            let mut keys = vec![key.to_string(); moves.unsigned_abs()];
            keys.push("Enter".into());
            Choice {
                label: crate::text::escape(&label(&lines[i].0)),
                keys,
            }
        })
        .collect()
}

/// `options` as a person picks them by number (`swarm attach <role>
/// --choose N`): `1. Yes | 2. No`.
pub fn numbered_options(options: &[Choice]) -> String {
    options
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{}. {}", i + 1, c.label))
        .collect::<Vec<_>>()
        .join(" | ")
}

fn one_line(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let esc = crate::text::escape(&flat);
    match esc.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &esc[..i]),
        None => esc,
    }
}

/// What the pane waits for, if it waits for a person.
pub fn classify(screen: &str) -> Option<Prompt> {
    let rows = tail(screen, TAIL);
    let lines: Vec<String> = rows.iter().map(|(l, _)| l.clone()).collect();
    let lower: Vec<String> = lines.iter().map(|l| l.to_lowercase()).collect();
    let hint = lower.iter().any(|l| HINTS.iter().any(|h| l.contains(h)));
    let marker = lines.iter().rposition(|l| marked(l).is_some());
    let known = NEEDS_INPUT
        .iter()
        .find(|(words, _)| lines.iter().any(|l| l.contains(words)));
    // A dialog: a highlighted option under a known prompt or above a
    // confirm hint (Gemini CLI's dialogs show no hint).
    if let (Some(at), true) = (marker, hint || known.is_some()) {
        let text = match known {
            Some((_, what)) => what.to_string(),
            // The question above the menu, else the highlighted option.
            None => lines[..at]
                .iter()
                .rev()
                .find(|l| l.trim_end().ends_with('?'))
                .map(|q| format!("a dialog asks: {}", q.trim()))
                .unwrap_or_else(|| format!("a menu waits on: {}", lines[at].trim())),
        };
        return Some(Prompt {
            wait: Wait::NeedsInput,
            text: one_line(&text),
            options: options(&rows, at),
        });
    }
    // A page that waits for Enter alone: its hint is the bottom line.
    if marker.is_none() && lower.last().is_some_and(|l| l.contains(PAGE_HINT)) {
        let text = known.map_or("a page waits: Press Enter to continue", |(_, what)| what);
        return Some(Prompt {
            wait: Wait::NeedsInput,
            text: one_line(text),
            options: vec![Choice {
                label: "Continue".into(),
                keys: vec!["Enter".into()],
            }],
        });
    }
    let last = &lower[lower.len().saturating_sub(ERROR_TAIL)..];
    let at = last
        .iter()
        .rposition(|l| BLOCKED.iter().any(|b| l.contains(b)) || auth_error(l))?;
    let line = &lines[lines.len() - last.len() + at];
    Some(Prompt {
        wait: Wait::Blocked,
        text: one_line(steady(line)),
        options: Vec::new(),
    })
}

/// A retrying CLI's error line without what changes while it retries (a
/// spinner glyph before it; the countdown and attempt after it: `✻ 401
/// invalid x-api-key · retrying in 2s · attempt 4/10` is `401 invalid
/// x-api-key`), so one error is reported once, not once per attempt.
fn steady(line: &str) -> &str {
    let line = line.trim_start_matches(|c: char| !c.is_alphanumeric());
    let lower = line.to_lowercase();
    match lower.find("retrying") {
        // Cut where the lower-case copy says, when it lines up (ASCII up to
        // there; otherwise keep the whole line).
        Some(i) if line.is_char_boundary(i) && line[..i].to_lowercase() == lower[..i] => line[..i]
            .trim_end_matches(|c: char| c.is_whitespace() || c == '·' || c == ',' || c == '-'),
        _ => line,
    }
}

/// `.swarmforge/daemon/waiting/<role>`: present while the role's pane waits
/// for a person; `<state>\t<time>\t<text>`.
pub fn marker_file(project: &Project, role: &str) -> PathBuf {
    project.daemon_dir().join("waiting").join(role)
}

/// A role's pane wait as the daemon last saw it: (wait, since, text).
pub fn reported(project: &Project, role: &str) -> Option<(Wait, String, String)> {
    let b = fsx::read_bounded(&marker_file(project, role), 4096).ok()?;
    let t = String::from_utf8_lossy(&b);
    let mut f = t.trim_end().splitn(3, '\t');
    let wait = match f.next()? {
        "needs_input" => Wait::NeedsInput,
        "blocked" => Wait::Blocked,
        _ => return None,
    };
    Some((wait, f.next()?.to_string(), f.next()?.to_string()))
}

/// Records what `role`'s pane shows: a `needs_input` / `blocked` event once
/// per prompt (the marker keeps "once" across sweeps, wake-ups and daemon
/// restarts), and the marker removed when the pane no longer waits.
pub fn report(project: &Project, role: &str, seen: Option<&Prompt>, journal: &Journal) {
    if let Some(ev) = mark(project, role, seen) {
        journal.record(&ev);
    }
}

/// [`report`] from outside the daemon: a headless turn (launch/turn/)
/// whose CLI retries a request the model refused (`blocked`).
pub fn report_outside(project: &Project, role: &str, seen: Option<&Prompt>) {
    if let Some(ev) = mark(project, role, seen) {
        crate::daemon::journal::record_outside(project, &ev);
    }
}

/// Writes or removes `role`'s marker; the event to record when the marker
/// is new.
fn mark(project: &Project, role: &str, seen: Option<&Prompt>) -> Option<Event> {
    let file = marker_file(project, role);
    let Some(p) = seen else {
        if file.exists() {
            let _ = fsx::remove_file(&file);
        }
        return None;
    };
    if reported(project, role).is_some_and(|(w, _, t)| w == p.wait && t == p.text) {
        return None;
    }
    let dir = project.daemon_dir().join("waiting");
    // One mkdir below the daemon's folder, never `create_dir_all`: a report
    // finishing after `.swarmforge/` was deleted must not bring it back.
    if !project.daemon_dir().is_dir() {
        return None;
    }
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    let line = format!("{}\t{}\t{}\n", p.wait.word(), clock::iso_now(), p.text);
    fsx::write_file(&file, line.as_bytes()).ok()?;
    Some(
        Event::new(match p.wait {
            Wait::NeedsInput => Kind::NeedsInput,
            Wait::Blocked => Kind::Blocked,
        })
        .recipient(role)
        .reason(p.text.clone()),
    )
}

/// The pane of `session` and what it waits for (None: it waits for
/// nobody); Err when it cannot be read (tmux slow or gone), which says
/// nothing about the pane: a reported prompt stays reported, or a busy
/// machine would clear it and notify the same prompt again.
pub fn look(socket: &Path, session: &str) -> Result<Option<Prompt>, TmuxError> {
    crate::sys::tmux::capture(socket, session).map(|s| classify(&s))
}

#[cfg(test)]
mod tests;
