//! What the client tells `swarm status` its agent does (docs/agents.md,
//! "The ACP runtime"; issue 46.4): `busy` while a turn runs, `waiting`
//! while a permission request waits for a person, `blocked` after a turn
//! the agent ended with an error (until a later turn starts), else
//! `idle`, each since when it began, in
//! [`acp_state_file`](crate::protocol::launch_files::acp_state_file).
//!
//! Why the client says it and status does not guess: only the client
//! knows whether a turn runs and whether a request waits; the process
//! that runs it (a pane, the supervisor) is busy either way.
//!
//! The invariants: the file is written only when the state changes
//! (temp + rename through fsx), in a folder a confined agent cannot
//! write; it is removed when the client stops, so a stopped client shows
//! no state (the runner's own liveness then speaks).

use super::*;
use crate::fsx;
use crate::protocol::launch_files::acp_state_file;

impl Client<'_> {
    /// The state the client is in now, and what it says.
    fn state(&self) -> (&'static str, String) {
        if let Some((a, _)) = self.asked.first() {
            return (
                "waiting",
                format!(
                    "clarify {}: {} (swarm answer {} --choice N)",
                    a.clarify, a.question, a.clarify
                ),
            );
        }
        if self.prompt.is_some() {
            return ("busy", String::new());
        }
        match &self.blocked {
            Some(e) => ("blocked", e.clone()),
            None => ("idle", String::new()),
        }
    }

    /// Writes the state when it changed since last shown.
    pub(super) fn show(&mut self) {
        let (state, detail) = self.state();
        if self
            .shown
            .as_ref()
            .is_some_and(|(s, d)| *s == state && *d == detail)
        {
            return;
        }
        let p = acp_state_file(&self.plan.project, self.role());
        let line = format!(
            "{state}\t{}\t{}\n",
            crate::protocol::clock::iso_now(),
            permission::one_line(&detail, 500)
        );
        let written = p
            .parent()
            .map_or(Ok(()), |d| fsx::ensure_dirs(&[d]))
            .and_then(|()| fsx::write_file(&p, line.as_bytes()));
        if let Err(e) = written {
            eprintln!("warning: {}: {e}", p.display());
        }
        self.shown = Some((state, detail));
    }

    /// The client stops: no state is shown.
    pub(super) fn unshow(&mut self) {
        let _ = fsx::remove_file(&acp_state_file(&self.plan.project, self.role()));
        self.shown = None;
    }
}
