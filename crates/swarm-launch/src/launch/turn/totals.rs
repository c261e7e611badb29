//! Running totals: a CLI that reports the conversation's tokens so far,
//! not the turn's ([`stream::cumulative`]), has its last total kept per
//! role (`agent_session::totals_path`, in the person's state, outside the
//! agent's reach) with the session it belongs to.
//!
//! Invariant kept here: **a token is journalled once**: a turn's usage is
//! the total reported less the total kept for the same session (another
//! session, or none kept, counts from zero; never below zero), and the
//! new total replaces the kept one whole (`fsx::replace`).

use std::path::Path;

use crate::fsx;
use crate::launch::agent_session;
use crate::launch::agents::stream::{self, Figures};
use crate::launch::agents::Cli;
use crate::protocol::layout::Project;

/// `f` less what the conversation `session` had reported before, for a
/// CLI that reports running totals; the new total is kept for the next
/// turn. Other CLIs' figures, and a run without a session, as they are.
pub(super) fn this_turn(
    project: &Project,
    role: &str,
    cli: Cli,
    session: Option<&str>,
    f: Figures,
) -> Figures {
    if !stream::cumulative(cli) {
        return f;
    }
    let Some(session) = session else {
        return f;
    };
    let file = agent_session::totals_path(project, role);
    let before: Vec<u64> = fsx::read_bounded(&file, 4096)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| {
            let mut w = t.split_whitespace();
            (w.next() == Some(session)).then(|| w.filter_map(|x| x.parse().ok()).collect())
        })
        .unwrap_or_default();
    let was = |i: usize| before.get(i).copied().unwrap_or(0);
    let line = format!(
        "{session} {} {} {} {}\n",
        f.input_tokens, f.output_tokens, f.cache_read_tokens, f.cache_write_tokens
    );
    if let Err(e) = fsx::replace(
        file.parent().unwrap_or(Path::new(".")),
        &file,
        line.as_bytes(),
    ) {
        eprintln!("warning: {}: {e}", file.display());
    }
    Figures {
        input_tokens: f.input_tokens.saturating_sub(was(0)),
        output_tokens: f.output_tokens.saturating_sub(was(1)),
        cache_read_tokens: f.cache_read_tokens.saturating_sub(was(2)),
        cache_write_tokens: f.cache_write_tokens.saturating_sub(was(3)),
        ..f
    }
}
