//! What a daemon does before its first pass: the pid file taken (one
//! daemon per project, and `swarm up` waits for its pid there), roles.tsv
//! and swarm.yaml read and checked, and the journal started. The
//! invariant: a daemon that fails here has changed nothing but its own
//! pid file, which it removes.

use super::alert;
use super::pid_file;
use crate::daemon::journal::{Event, Journal, Kind};
use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::config::Config;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;

/// roles.tsv (its problem lines said and skipped) and swarm.yaml, read
/// and checked, with the table of people (protocol::people).
pub(super) fn load(project: &Project) -> Result<(Roles, Config)> {
    // Roles::load refuses a FIFO or device there (it would block or feed the
    // daemon forever) and a file over its size limit.
    let roles = Roles::load(&project.roles_tsv())?;
    for p in &roles.problems {
        eprintln!(
            "handoffd: {}: {p}; that line is skipped",
            project.roles_tsv().display()
        );
    }
    // A person's mail must never reach an agent's inbox (protocol::people).
    crate::protocol::people::check_table(project, &roles)?;
    let config = Config::load(&project.config_file())?;
    Ok((roles, config))
}

/// The daemon's pid file, locked and holding this process's pid (`swarm up`
/// waits for it there); refused without a swarm, or while another daemon
/// holds it.
pub(super) fn take_pid_file(project: &Project) -> Result<fsx::Lock> {
    let root = &project.root;
    if !project.swarmforge().is_dir() {
        return Err(Error::not_found(format!(
            "No swarm at {} (missing .swarmforge/).\n  hint: run `swarm init {}` first",
            root.display(),
            root.display()
        )));
    }
    let dir = project.daemon_dir();
    fsx::ensure_dirs(&[&dir]).at(&dir)?;
    let pid_path = project.pid_file();
    let Some(lock) = pid_file::lock(&pid_path)? else {
        let pid = std::fs::read_to_string(&pid_path).unwrap_or_default();
        return Err(Error::conflict(format!(
            "handoffd is already running for {} (pid {}).\n  hint: `swarm stop {}` stops it",
            root.display(),
            pid.trim(),
            root.display()
        )));
    };
    // Written at once: `swarm up` waits for the holder's pid in this file.
    fsx::rewrite_locked(&lock, format!("{}\n", std::process::id()).as_bytes()).at(&pid_path)?;
    Ok(lock)
}

/// The journal, with its alerts and log policy; traces leave on threads of
/// their own, never on the delivery path (not with `--once`).
pub(super) fn start_journal(project: &Project, config: &Config, once: bool) -> Journal {
    let journal =
        Journal::new(project).told(alert::Notifier::start(project).map(alert::Notifier::listener));
    journal.set_policy(config.logs.policy());
    if let Some(e) = config.otel.endpoint.as_deref().filter(|_| !once) {
        let j = journal.clone();
        crate::telemetry::otlp::Exporter::start(
            project,
            e,
            std::sync::Arc::new(move |why: String| {
                j.record(&Event::new(Kind::TracesDropped).reason(why))
            }),
        );
    }
    journal
}
