//! An agent that exits at once (docs/headless.md, "An agent that dies at
//! start"): the record `swarm up` keeps of it, and the first lines of its
//! error as read from its log (headless) or its pane (tmux).
//!
//! The headless supervisor writes `.swarmforge/agents/<role>.dead` when a run
//! exits non-zero within the start window having changed nothing, and
//! removes it when it starts the role again; `swarm status` shows the role
//! `dead` with the record's reason. A detached headless `swarm up` waits for
//! the supervisor's start report (`.swarmforge/daemon/swarm-up.started`)
//! before it returns, so it can name the roles that died.
//!
//! Everything read back is untrusted (an unconfined agent can write these
//! folders): read bounded, each line cut and escaped.

use std::path::PathBuf;

use crate::fsx;
use crate::protocol::launch_files::agents_dir;
use crate::protocol::layout::Project;

/// Lines of an agent's error quoted, at most.
pub const MAX_LINES: usize = 5;
/// Characters of one quoted line, at most.
const MAX_LINE_CHARS: usize = 200;
/// Largest record read back.
const MAX_RECORD: u64 = 8 * 1024;
/// How much of a run's output is read for its first lines.
const LOG_READ: u64 = 64 * 1024;

/// `.swarmforge/agents/<role>.dead`: present while the headless supervisor
/// holds the role dead after its agent exited at once.
pub fn dead_file(p: &Project, role: &str) -> PathBuf {
    agents_dir(p).join(format!("{role}.dead"))
}

/// `.swarmforge/daemon/swarm-up.started`: written by the headless supervisor
/// once every agent's first run has outlived the start window or ended.
pub fn start_report_file(p: &Project) -> PathBuf {
    p.daemon_dir().join("swarm-up.started")
}

/// Why an agent is dead: its exit status, when, and the first lines of its
/// error (as printed, cut; escaped when shown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Death {
    pub status: String,
    pub at: String,
    pub lines: Vec<String>,
}

impl Death {
    /// `exit 3: boom` (the first line only), or `exit 3` without output.
    pub fn reason(&self) -> String {
        match self.lines.first() {
            Some(l) => format!("exit {}: {}", self.status, shown(l)),
            None => format!("exit {} (no output)", self.status),
        }
    }

    /// The lines quoted under a headline, indented, or a note that there
    /// was no output.
    pub fn quoted(&self) -> String {
        if self.lines.is_empty() {
            return "  (it printed nothing)".into();
        }
        self.lines
            .iter()
            .map(|l| format!("  | {}", shown(l)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn write(&self, p: &Project, role: &str) -> std::io::Result<()> {
        let mut text = format!("exit {} {}\n", self.status, self.at);
        for l in &self.lines {
            text.push_str(l);
            text.push('\n');
        }
        let dir = agents_dir(p);
        fsx::ensure_dirs(&[&dir])?;
        fsx::write_file(&dead_file(p, role), text.as_bytes())
    }

    /// The record of `role`, when there is one that reads.
    pub fn read(p: &Project, role: &str) -> Option<Death> {
        let b = fsx::read_bounded(&dead_file(p, role), MAX_RECORD).ok()?;
        let text = String::from_utf8_lossy(&b);
        let mut lines = text.lines();
        let mut head = lines.next()?.split_whitespace();
        if head.next()? != "exit" {
            return None;
        }
        let status = clean(head.next().unwrap_or("?"));
        let at = clean(head.next().unwrap_or("?"));
        Some(Death {
            status,
            at,
            lines: error_lines(&lines.collect::<Vec<_>>().join("\n")),
        })
    }
}

/// A quoted line as shown: escaped, then cut (an escape takes up to 10
/// characters for one).
fn shown(l: &str) -> String {
    crate::text::escape(l)
        .chars()
        .take(MAX_LINE_CHARS)
        .collect()
}

fn clean(s: &str) -> String {
    let cut: String = s.chars().take(MAX_LINE_CHARS).collect();
    crate::text::escape(&cut)
}

/// The first [`MAX_LINES`] non-blank lines of `text`, trimmed and cut (to
/// be escaped when shown).
pub fn error_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(MAX_LINES)
        .map(|l| l.chars().take(MAX_LINE_CHARS).collect())
        .collect()
}

/// The start of a headless run's output in its agent's log: what the log
/// holds from `offset` (its length when the run was started), bounded,
/// without the supervisor's `[swarm] run N of role R` line.
pub fn run_in_log(log: &std::path::Path, offset: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = fsx::open_regular(log) else {
        return String::new();
    };
    if f.seek(SeekFrom::Start(offset)).is_err() {
        return String::new();
    }
    let mut b = Vec::new();
    let _ = f.take(LOG_READ).read_to_end(&mut b);
    let text = String::from_utf8_lossy(&b);
    match text.strip_prefix("[swarm] run ") {
        Some(rest) => rest
            .split_once('\n')
            .map(|(_, r)| r)
            .unwrap_or("")
            .to_string(),
        None => text.into_owned(),
    }
}

/// The pane script's line after each run (launch/sessions.rs).
pub const PANE_EXIT_MARK: &str = "[swarm] the agent of role ";

/// The output of the last run in a captured tmux pane: the lines between
/// the pane script's previous exit line (if any) and its last one.
pub fn last_run_in_pane(screen: &str) -> String {
    let lines: Vec<&str> = screen.lines().collect();
    let Some(end) = lines.iter().rposition(|l| l.starts_with(PANE_EXIT_MARK)) else {
        return screen.to_string();
    };
    let start = lines[..end]
        .iter()
        .rposition(|l| l.starts_with(PANE_EXIT_MARK))
        .map_or(0, |i| i + 1);
    lines[start..end].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_run_of_a_pane_is_between_its_exit_lines() {
        let screen = "old\n[swarm] the agent of role a exited (status 1). A wake-up\nboom\n\nsecond\n[swarm] the agent of role a exited (status 3). A wake-up\n";
        assert_eq!(error_lines(&last_run_in_pane(screen)), ["boom", "second"]);
    }

    #[test]
    fn quoted_lines_are_bounded_and_escaped() {
        let long = "x".repeat(500);
        let text = format!("a\u{1b}[31m\n{long}\n3\n4\n5\n6\n7\n");
        let d = Death {
            status: "3".into(),
            at: "t".into(),
            lines: error_lines(&text),
        };
        assert_eq!(d.lines.len(), MAX_LINES);
        assert_eq!(d.lines[1].chars().count(), MAX_LINE_CHARS);
        assert!(d
            .quoted()
            .lines()
            .all(|l| l.chars().count() <= MAX_LINE_CHARS + 4));
        assert!(!d.reason().contains('\u{1b}'), "{d:?}");
        assert!(!d.quoted().contains('\u{1b}'), "{d:?}");
    }
}
