//! The forum transcript: every message once, in the order it was said, as one
//! line each (BettaFish's forum-log shape), as JSON lines, or as Markdown.
//!
//! One line per message: `[HH:MM:SS] [FROM -> TO] <type> <summary>`, times in
//! UTC from `created_at`, a `--- YYYY-MM-DD ---` line whenever the day changes.
//! `forum.log` (written by the daemon) uses the same line with the full date in
//! the brackets, `[YYYY-MM-DD HH:MM:SS] ...`, because it has no date lines.
//! Control characters and backslashes are escaped, so one message is one line.

pub mod follow;
pub mod print;
pub mod select;

pub use print::{dated_line, jsonl, md, session_marker, Edge, Printer};
pub use select::{
    is_folded, messages, parse_time, reaction_marks, sort, thread_order, thread_root, Filter,
};

use crate::error::Result;
use crate::protocol::layout::Project;
use crate::protocol::line;
use crate::protocol::trail::{self, Original};
use crate::text;
use crate::views::vouched;

/// The last `n` transcript lines (dated) of the messages `role` sent or was
/// sent (every message when `role` is None), oldest first.
pub fn recent_lines(project: &Project, role: Option<&str>, n: usize) -> Result<Vec<String>> {
    let t = trail::Trail::load(project, &trail::Scope::originals())?;
    let filter = Filter {
        role: role.map(str::to_string),
        ..Filter::default()
    };
    let shown: Vec<&Original> = messages(&t.originals)
        .into_iter()
        .filter(|o| filter.matches(&o.msg, &t.roles))
        .collect();
    let skip = shown.len().saturating_sub(n);
    let shown = &shown[skip..];
    // An agent's forged line is not shown to the others as said.
    let doubts = vouched::doubts(&t, shown.iter().copied());
    Ok(shown
        .iter()
        .map(|o| match doubts.get(&o.path) {
            Some(why) => format!(
                "[{}] [unverified] {}: {}",
                line::full_time(o.when()),
                text::escape(&o.path.display().to_string()),
                text::escape(why)
            ),
            None => dated_line(o),
        })
        .collect())
}

/// Output format of `swarm transcript`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Jsonl,
    Md,
}
