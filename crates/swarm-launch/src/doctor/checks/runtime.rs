//! The running swarm: the daemon (one, and this build), its logs, free disk
//! space, clock skew between stamps, and the trail's audit.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::super::{Context, Finding};
use crate::daemon::control;
use crate::protocol::clock;
use crate::protocol::launch_files;
use crate::text;
use crate::views::audit::check;
use crate::views::audit::lag::Lag;

/// Stamps this far apart (sender's clock vs. the daemon's) count as skew.
const SKEW_SECS: i64 = 2;

/// A stamp this far in the future is a clock that is ahead.
const FUTURE_SECS: i64 = 60;

/// Free space below this (bytes) on the project's file system.
const MIN_FREE_BYTES: u64 = 100 * 1024 * 1024;

/// Most audit violations listed one by one (the rest are counted).
const MAX_LISTED: usize = 20;

/// The `handoffd` processes serving this project (by their command line).
fn daemons_for(root: &Path) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let want = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            let is_daemon = args.first().is_some_and(|a| {
                Path::new(std::ffi::OsStr::from_bytes(a)).file_name()
                    == Some(std::ffi::OsStr::new("handoffd"))
            });
            is_daemon
                && !args.iter().any(|a| *a == b"--once")
                && args.iter().skip(1).any(|a| {
                    Path::new(std::ffi::OsStr::from_bytes(a))
                        .canonicalize()
                        .is_ok_and(|p| p == want)
                })
        })
        .collect()
}

/// The daemon: running, only one, and the same build as this CLI.
pub fn daemon(cx: &Context) -> Vec<Finding> {
    if !cx.initialised {
        return Vec::new();
    }
    let root = &cx.project.root;
    let Some(pid) = control::running_pid(&cx.project) else {
        return vec![Finding::new(
            "DAEMON_NOT_RUNNING",
            format!(
                "no handoffd delivers for {}: messages stay in outboxes",
                root.display()
            ),
            format!("run `swarm up`, or `handoffd {} &`", root.display()),
        )
        .at(cx.project.pid_file())];
    };
    let mut out = Vec::new();
    let all = daemons_for(root);
    if all.len() > 1 {
        out.push(Finding::new(
            "DAEMON_MULTIPLE",
            format!(
                "{} handoffd processes name {} (pids {})",
                all.len(),
                root.display(),
                all.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ),
            format!("keep the one holding the pid file lock (pid {pid}); stop the others with kill <pid>"),
        ));
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"));
    match exe {
        Ok(p) if p.to_string_lossy().ends_with(" (deleted)") => out.push(Finding::new(
            "DAEMON_STALE_BINARY",
            format!(
                "handoffd (pid {pid}) runs a binary that was replaced or deleted since it started: {}",
                p.display()
            ),
            format!("restart it: `swarm stop {r}` then `swarm up` (or `handoffd {r} &`)", r = root.display()),
        )),
        Ok(p) => {
            let v = Command::new(&p)
                .arg("--version")
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
            let mine = env!("CARGO_PKG_VERSION");
            if let Some(v) = v.filter(|v| v.split_whitespace().last() != Some(mine)) {
                out.push(Finding::new(
                    "DAEMON_VERSION",
                    format!(
                        "handoffd (pid {pid}, {}) reports '{}', this swarm is {mine}",
                        p.display(),
                        text::escape(&v)
                    ),
                    format!("restart it with this build: `swarm stop {r}` then `swarm up`", r = root.display()),
                ));
            }
        }
        // Another user's process: nothing more to learn.
        Err(_) => {}
    }
    out
}

/// Logs that grow past twice their rotation size are not being rotated.
pub fn logs(cx: &Context) -> Vec<Finding> {
    if !cx.initialised {
        return Vec::new();
    }
    let limit = cx.config.logs.max_bytes;
    if limit == 0 {
        return Vec::new();
    }
    let p = &cx.project;
    let mut files = vec![p.log_file(), p.events_file(), p.daemon_output()];
    files.extend(
        launch_files::agent_files(p, "log")
            .into_iter()
            .map(|(_, f)| f),
    );
    files
        .into_iter()
        .filter_map(|f| {
            let len = std::fs::metadata(&f).ok()?.len();
            (len > limit.saturating_mul(2)).then(|| {
                Finding::new(
                    "LOG_TOO_LARGE",
                    format!(
                        "{} holds {len} bytes, more than twice logs.max_bytes ({limit})",
                        f.display()
                    ),
                    "move it away or truncate it when no swarm runs; handoffd rotates its own logs, agent logs grow with what the agents print",
                )
                .at(f)
            })
        })
        .collect()
}

/// Room left on the project's file system (a full disk fails every send).
pub fn disk_space(cx: &Context) -> Vec<Finding> {
    let Ok(st) = rustix::fs::statvfs(&cx.project.root) else {
        return Vec::new();
    };
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    let total = st.f_blocks.saturating_mul(st.f_frsize);
    if free >= MIN_FREE_BYTES || total == 0 {
        return Vec::new();
    }
    vec![Finding::new(
        "DISK_LOW",
        format!(
            "only {} MiB free of {} MiB on the file system of {}",
            free / (1024 * 1024),
            total / (1024 * 1024),
            cx.project.root.display()
        ),
        "free space (e.g. `swarm archive`, old agent logs); a full disk refuses every send and delivery",
    )]
}

/// Stamps that disagree: a copy enqueued before it was created (the
/// sender's clock is ahead of the daemon's), or stamps in the future.
pub fn clock_skew(cx: &Context) -> Vec<Finding> {
    if !cx.initialised {
        return Vec::new();
    }
    let Some(Ok(t)) = cx.trail() else {
        return Vec::new();
    };
    let now = clock::now();
    let mut worst: Option<(i64, PathBuf)> = None;
    let mut future: Option<(i64, PathBuf)> = None;
    let mut count = 0usize;
    for c in &t.copies {
        if let (Some(cr), Some(en)) = (c.created.at(), c.enqueued.at()) {
            let ahead = (cr - en).num_seconds();
            if ahead > SKEW_SECS {
                count += 1;
                if worst.as_ref().is_none_or(|(w, _)| ahead > *w) {
                    worst = Some((ahead, c.path.clone()));
                }
            }
        }
    }
    for o in &t.originals {
        if let Some(at) = o.when() {
            let ahead = (at - now).num_seconds();
            if ahead > FUTURE_SECS && future.as_ref().is_none_or(|(w, _)| ahead > *w) {
                future = Some((ahead, o.path.clone()));
            }
        }
    }
    let mut out = Vec::new();
    if let Some((s, path)) = worst {
        out.push(
            Finding::new(
                "CLOCK_SKEW",
                format!("{count} cop(ies) were enqueued before they were created, by up to {s} s: a sender's clock runs ahead of the daemon's"),
                "synchronise the clocks (NTP: timedatectl set-ntp true) of every host and container that sends",
            )
            .at(path),
        );
    }
    if let Some((s, path)) = future {
        out.push(
            Finding::new(
                "CLOCK_SKEW",
                format!("a message is stamped {s} s in the future"),
                "synchronise the clocks (NTP) of every host and container that sends",
            )
            .at(path),
        );
    }
    out
}

/// What `swarm audit --check` finds.
pub fn audit(cx: &Context) -> Vec<Finding> {
    // The trail is read with the config and the role table: a broken one
    // is the `config` check's finding, not an unreadable trail.
    if !cx.initialised || cx.config_error.is_some() || cx.roles_error.is_some() {
        return Vec::new();
    }
    let lag = Lag::before_load(&cx.project);
    let Some(t) = cx.trail() else {
        return Vec::new();
    };
    let t = match t {
        Ok(t) => t,
        Err(e) => {
            return vec![Finding::new(
                "AUDIT_UNREADABLE",
                e.to_string(),
                "repair what the message names, then run `swarm audit --check`",
            )]
        }
    };
    let v = check::verify(&t, lag).violations;
    let mut out: Vec<Finding> = v
        .iter()
        .take(MAX_LISTED)
        .map(|x| {
            Finding::new(
                "AUDIT_VIOLATION",
                format!("{} {}: {}", x.kind, x.subject, x.detail),
                "see `swarm audit --check` and docs/transcript-and-audit.md for what each violation means",
            )
        })
        .collect();
    if v.len() > MAX_LISTED {
        out.push(Finding::new(
            "AUDIT_VIOLATION",
            format!("… and {} more violation(s)", v.len() - MAX_LISTED),
            "run `swarm audit --check` for the whole list",
        ));
    }
    out
}
