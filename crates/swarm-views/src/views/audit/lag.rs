//! Lag is not loss: a copy the audit cannot find may be on its way (the
//! mirror of another host's files lags that host, a relayed copy is still
//! crossing), so before `missing_copy` is called a violation this module
//! asks whether the files could hold it yet (docs/transcript-and-audit.md,
//! "Lag is not loss").
//!
//! - A copy for a role on another host is judged by that host's own word:
//!   its mirrored events say when it delivered the message (`delivered`,
//!   at an offset), and its trail mark says up to which offset of those
//!   events every file it held is mirrored here. Delivered before the mark
//!   and still absent: lost. Not delivered there yet, or after the mark:
//!   pending.
//! - A copy for a role of this host, of an original mirrored from another
//!   host, is judged once it reached this host's relay folder: delivered
//!   (`sent/`) or refused (`failed/`) there and absent is lost; still waiting
//!   there, or not arrived yet, is pending.

use std::collections::HashMap;
use std::path::Path;

use crate::bridge::events::Mirror;
use crate::bridge::trail;
use crate::fsx;
use crate::protocol::grammar::strip_collision_prefix;
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::trail::{handoff_names, Original, Trail};

/// Largest mirrored events file read (larger: read as far as this).
const MAX_EVENTS_BYTES: u64 = 256 * 1024 * 1024;

/// What a missing copy is.
pub enum Judged {
    /// The files say it should be here: a violation, with what says so.
    Lost(String),
    /// It may still come: why, and how far behind the mirror is.
    Pending(String),
}

/// What this host knows of another host's progress.
struct Remote {
    /// Every file the host held before this events offset is mirrored here.
    mark: Option<u64>,
    /// The newest of its events mirrored here.
    newest: Option<u64>,
    /// `delivered` events by id: offset and the relay role when the copy
    /// came through one (None: the original was sent on that host).
    delivered: HashMap<String, Vec<(u64, Option<String>)>>,
}

/// Reads each host's mirrored events at most once per audit.
///
/// What says "it should be here" is read *before* the trail
/// ([`Lag::before_load`]): a mark read first covers only files mirrored
/// before the trail was listed, and a relayed copy in `sent/` before the
/// listing was in its inbox before it too, so a copy arriving while the
/// audit reads is pending, never lost. (Events only add deliveries; they
/// may be read later.)
#[derive(Default)]
pub struct Lag {
    hosts: HashMap<String, Remote>,
    /// Each host's trail mark, read before the trail.
    marks: HashMap<String, u64>,
    /// Per local role, the names in its relay folder's `sent/` and
    /// `failed/`, read before the trail. (`Lag::default()` has neither, so
    /// it calls every copy crossing hosts pending.)
    relayed: HashMap<String, (Vec<String>, Vec<String>)>,
}

/// The host an original's file was mirrored from, if it was.
fn mirrored_from(t: &Trail, path: &Path) -> Option<String> {
    let rel = path
        .strip_prefix(t.project.bridge_dir().join("hosts"))
        .ok()?;
    Some(
        rel.components()
            .next()?
            .as_os_str()
            .to_string_lossy()
            .into_owned(),
    )
}

/// The role whose relay folder a delivered path lies in (on its host).
fn relay_role(path: &str) -> Option<String> {
    let (_, rest) = path.rsplit_once("/.swarmforge/bridge/in/")?;
    Some(rest.split('/').next()?.to_string())
}

fn load_remote(t: &Trail, host: &str, mark: Option<u64>) -> Remote {
    let file = Mirror::file(&t.project, host);
    let text = fsx::read_bounded(&file, MAX_EVENTS_BYTES)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let mut r = Remote {
        mark,
        newest: None,
        delivered: HashMap::new(),
    };
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(offset) = v["offset"].as_u64() else {
            continue;
        };
        r.newest = Some(r.newest.map_or(offset, |n| n.max(offset)));
        let ev = &v["event"];
        if ev["kind"] != "delivered" {
            continue;
        }
        let (Some(id), path) = (ev["id"].as_str(), ev["path"].as_str().unwrap_or("")) else {
            continue;
        };
        r.delivered
            .entry(id.to_string())
            .or_default()
            .push((offset, relay_role(path)));
    }
    r
}

fn offset(o: Option<u64>) -> String {
    o.map_or_else(|| "none yet".to_string(), |o| o.to_string())
}

/// The names of the files in a folder (sorted; none when it is missing).
fn names(dir: &Path) -> Vec<String> {
    handoff_names(dir).unwrap_or_default()
}

impl Lag {
    /// Reads the marks and relay folders of `project`; call it before
    /// loading the trail that is judged with it.
    pub fn before_load(project: &Project) -> Lag {
        let mut lag = Lag::default();
        for host in project.marked_hosts() {
            if let Some(m) = trail::read_mark(project, &host) {
                lag.marks.insert(host, m);
            }
        }
        for role in project.relayed_roles() {
            let wt = Worktree::new(project.bridge_relay(&role));
            lag.relayed
                .insert(role, (names(&wt.sent()), names(&wt.failed())));
        }
        lag
    }

    /// Judges the missing copy of `o` for `names` (roles sharing one inbox).
    pub fn judge(&mut self, t: &Trail, o: &Original, names: &[String]) -> Judged {
        let remote_host = names.iter().find_map(|n| {
            let r = t.roles.find(n)?;
            r.is_remote()
                .then(|| r.worktree_name.trim_start_matches('@').to_string())
        });
        match remote_host {
            Some(host) => self.judge_remote(t, o, names, &host),
            None => self.judge_relayed(t, o, names),
        }
    }

    /// Judges a copy whose original is not here: sent by a role on another
    /// host, the original may not be mirrored yet.
    pub fn judge_orphan(&mut self, t: &Trail, id: &str, from: Option<&str>) -> Judged {
        let host = from.and_then(|f| t.roles.find(f)).and_then(|r| {
            r.is_remote()
                .then(|| r.worktree_name.trim_start_matches('@').to_string())
        });
        let Some(host) = host else {
            return Judged::Lost(String::new());
        };
        self.judged(t, id, None, &host)
    }

    fn judge_remote(&mut self, t: &Trail, o: &Original, names: &[String], host: &str) -> Judged {
        self.judged(t, o.id(), Some(names), host)
    }

    /// By host `host`'s `delivered` event of `id`: through the relay folder
    /// of one of `names`, or (None) on the host where it was sent.
    fn judged(&mut self, t: &Trail, id: &str, names: Option<&[String]>, host: &str) -> Judged {
        let mark = self.marks.get(host).copied();
        let r = self
            .hosts
            .entry(host.to_string())
            .or_insert_with(|| load_remote(t, host, mark));
        let behind = format!(
            "host {host}'s files are mirrored up to its event offset {}, its events up to offset {}",
            offset(r.mark),
            offset(r.newest)
        );
        let at = r.delivered.get(id).and_then(|v| {
            v.iter()
                .filter(|(_, relay)| match (relay, names) {
                    (None, _) => true,
                    (Some(role), Some(names)) => names.contains(role),
                    (Some(_), None) => false,
                })
                .map(|(off, _)| *off)
                .min()
        });
        match at {
            Some(at) if r.mark.is_some_and(|m| m > at) => Judged::Lost(format!(
                "host {host} delivered it at its event offset {at} and every file it held before offset {} is mirrored here",
                offset(r.mark)
            )),
            Some(at) => Judged::Pending(format!(
                "delivered on host {host} at its event offset {at}, not mirrored yet ({behind})"
            )),
            None => Judged::Pending(format!(
                "no delivery on host {host} among its mirrored events yet ({behind})"
            )),
        }
    }

    /// A copy for a role of this host whose original was sent on another
    /// host.
    fn judge_relayed(&self, t: &Trail, o: &Original, names: &[String]) -> Judged {
        let Some(from) = mirrored_from(t, &o.path) else {
            return Judged::Lost(String::new());
        };
        let tail = format!("_{}_to_", o.id());
        let holds = |v: &Vec<String>| v.iter().any(|n| strip_collision_prefix(n).contains(&tail));
        for name in names {
            let Some((sent, failed)) = self.relayed.get(name) else {
                continue;
            };
            let relay = Worktree::new(t.project.bridge_relay(name));
            if holds(sent) {
                return Judged::Lost(format!(
                    "delivered here from host {from} (in {})",
                    relay.sent().display()
                ));
            }
            if holds(failed) {
                return Judged::Lost(format!("refused here (see {})", relay.failed().display()));
            }
        }
        Judged::Pending(format!(
            "sent on host {from}, not delivered here yet (in transit or waiting in the relay folder)"
        ))
    }
}
