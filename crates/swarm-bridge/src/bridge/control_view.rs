//! The swarm-wide view of control (docs/bridge.md, "One control"): which
//! host is paused and by whom, which control records each host has applied
//! and which it has not confirmed yet, and the handoffs held on other hosts.
//! Read from this host's journal and the mirrored journals of the others
//! (`bridge::events`), so it lags another host by the mirror's delay; a host
//! partitioned away shows its last known state and its controls pending.

use std::collections::BTreeMap;

use serde::Serialize;

use super::control::{self, RemoteHeld};
use crate::person::holds;
use crate::protocol::layout::Project;
use crate::protocol::swarm::Swarm;
use crate::protocol::trail::Violation;

/// Control records listed by `swarm status` (the newest).
const SHOWN: usize = 10;

/// One host's pause state as far as this host knows it.
#[derive(Clone, Debug, Serialize)]
pub struct HostState {
    pub host: String,
    /// `paused` or `running`; `unknown` before any of its events arrived.
    pub state: String,
    /// The control that set it (`<id> <kind> by <who> on <host>`).
    pub by: Option<String>,
    pub since: Option<String>,
}

/// One control record and where it was applied.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub id: String,
    pub kind: String,
    pub by: String,
    pub host: String,
    pub at: String,
    /// Host → what applying it did there (`refused: …` when refused).
    pub applied: BTreeMap<String, String>,
    /// The hosts that have not confirmed it yet.
    pub pending: Vec<String>,
    /// Host → what it waits for there (`control_waiting`, not applied yet).
    pub waiting: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct SwarmControl {
    pub hosts: Vec<HostState>,
    pub controls: Vec<Entry>,
    /// Control records refused as bad input on any host (newest last).
    pub refused: Vec<String>,
    pub held_elsewhere: Vec<RemoteHeld>,
}

/// A control event, parsed from its reason (`control::journal`).
struct Ev {
    word: String,
    time: String,
    id: String,
    kind: String,
    by: String,
    origin: String,
    outcome: String,
}

fn parse(host_event: &serde_json::Value) -> Option<Ev> {
    let word = host_event["kind"].as_str()?;
    if !word.starts_with("control_") {
        return None;
    }
    let reason = host_event["reason"].as_str().unwrap_or("");
    let (head, outcome) = reason.split_once(": ").unwrap_or((reason, ""));
    let t: Vec<&str> = head.split_whitespace().collect();
    let (id, kind, by, origin) = match t.as_slice() {
        [id, kind, "by", by, "on", origin] => (*id, *kind, *by, *origin),
        _ => ("", "", "", ""),
    };
    Some(Ev {
        word: word.to_string(),
        time: host_event["time"].as_str().unwrap_or("").to_string(),
        id: id.to_string(),
        kind: kind.to_string(),
        by: by.to_string(),
        origin: origin.to_string(),
        outcome: if id.is_empty() { reason } else { outcome }.to_string(),
    })
}

/// Every control event of every host (this host's journal and the
/// mirrors), and the time of the oldest event this host's journal keeps.
fn events(project: &Project, me: &str, hosts: &[String]) -> (BTreeMap<String, Vec<Ev>>, String) {
    let mut out: BTreeMap<String, Vec<Ev>> = BTreeMap::new();
    for h in hosts {
        out.entry(h.clone()).or_default();
    }
    // read_from reads a bounded slice per call: read on to the end.
    let (mut own, mut first) = (Vec::new(), None);
    let mut from = 0;
    while let Ok((lines, next)) = super::events::read_from(project, from, u64::MAX, 4096) {
        if next == from {
            break;
        }
        if first.is_none() {
            first = lines.first().cloned();
        }
        own.extend(lines.into_iter().filter(|l| l.text.contains("\"control_")));
        from = next;
    }
    // Pruned only when its first kept line is not at offset 0: a journal
    // that merely began after another host's records (a daemon slow to
    // start) still covers everything this host ever applied.
    let oldest = first
        .filter(|l| l.offset > 0)
        .and_then(|l| serde_json::from_str::<serde_json::Value>(&l.text).ok())
        .and_then(|v| v["time"].as_str().map(str::to_string))
        .unwrap_or_default();
    let mine = out.entry(me.to_string()).or_default();
    for l in &own {
        if let Some(e) = serde_json::from_str(&l.text).ok().as_ref().and_then(parse) {
            mine.push(e);
        }
    }
    for v in super::events::all(project) {
        let h = v["host"].as_str().unwrap_or("").to_string();
        if h == me || !hosts.contains(&h) {
            continue;
        }
        if let Some(e) = parse(&v["event"]) {
            out.entry(h).or_default().push(e);
        }
    }
    (out, oldest)
}

/// The swarm-wide control state; None without a bridge.
pub fn collect(project: &Project) -> Option<SwarmControl> {
    collect_in(&Swarm::new(project.clone()))
}

/// [`collect`] in a loaded swarm.
pub fn collect_in(swarm: &Swarm) -> Option<SwarmControl> {
    let project = &swarm.project;
    let (config, me) = control::bridged_in(swarm)?;
    // Read through the index: only what the journals gained since.
    let mut evs: BTreeMap<String, Vec<Ev>> =
        super::control_index::control_events(project, &me, &config.hosts)
            .into_iter()
            .map(|(h, list)| (h, list.iter().filter_map(parse).collect()))
            .collect();
    for h in &config.hosts {
        evs.entry(h.clone()).or_default();
    }
    let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
    let mut refused = Vec::new();
    for (h, list) in &evs {
        for e in list {
            if e.id.is_empty() {
                if e.word == "control_refused" {
                    refused.push(format!("{} on {h}: {}", e.time, e.outcome));
                }
                continue;
            }
            let en = entries.entry(e.id.clone()).or_insert_with(|| Entry {
                id: e.id.clone(),
                kind: e.kind.clone(),
                by: e.by.clone(),
                host: e.origin.clone(),
                at: e.time.clone(),
                applied: BTreeMap::new(),
                pending: Vec::new(),
                waiting: BTreeMap::new(),
            });
            if e.word == "control_sent" {
                en.at = e.time.clone();
            }
            if e.word == "control_waiting" {
                en.waiting.insert(h.clone(), e.outcome.clone());
                continue;
            }
            en.waiting.remove(h);
            let what = if e.word == "control_refused" {
                format!("refused: {}", e.outcome)
            } else {
                e.outcome.clone()
            };
            en.applied.insert(h.clone(), what);
        }
    }
    let mut controls: Vec<Entry> = entries.into_values().collect();
    // One host's ids sort in issue order; across hosts, by time.
    controls.sort_by(|a, b| (&a.at, &a.id).cmp(&(&b.at, &b.id)));
    for c in &mut controls {
        c.pending = config
            .hosts
            .iter()
            .filter(|h| !c.applied.contains_key(*h) && !c.waiting.contains_key(*h) && **h != c.host)
            .cloned()
            .collect();
    }
    let hosts = config
        .hosts
        .iter()
        .map(|h| host_state(project, &me, h, &evs))
        .collect();
    let skip = controls.len().saturating_sub(SHOWN);
    refused.sort();
    let skip_r = refused.len().saturating_sub(SHOWN);
    Some(SwarmControl {
        hosts,
        controls: controls.split_off(skip),
        refused: refused.split_off(skip_r),
        held_elsewhere: held_elsewhere(project, &config.hosts, &me),
    })
}

/// Host `h`'s pause state: this host's pause file, another's last pause or
/// resume it journaled.
fn host_state(project: &Project, me: &str, h: &str, evs: &BTreeMap<String, Vec<Ev>>) -> HostState {
    let last = evs.get(h).and_then(|l| {
        l.iter()
            .rev()
            .find(|e| (e.kind == "pause" || e.kind == "resume") && e.word != "control_refused")
    });
    let by = last.map(|e| format!("{} {} by {} on {}", e.id, e.kind, e.by, e.origin));
    if h == me {
        let p = crate::daemon::gate::pause_state(project);
        return HostState {
            host: h.to_string(),
            state: if p.is_some() { "paused" } else { "running" }.into(),
            by,
            since: p.map(|p| p.since),
        };
    }
    let state = match last {
        Some(e) if e.kind == "pause" => "paused",
        Some(_) => "running",
        None if evs.get(h).is_some_and(|l| !l.is_empty()) => "running",
        None => "unknown",
    };
    HostState {
        host: h.to_string(),
        state: state.into(),
        since: last.filter(|e| e.kind == "pause").map(|e| e.time.clone()),
        by,
    }
}

/// The handoffs held on other hosts, from their mirrored trails.
pub fn held_elsewhere(project: &Project, hosts: &[String], me: &str) -> Vec<RemoteHeld> {
    let max = crate::protocol::config::Limits::max_file_bytes_of(&project.config_file());
    let mut out = Vec::new();
    for h in hosts.iter().filter(|h| *h != me) {
        let base = project.bridge_dir().join("hosts").join(h);
        for wt in crate::protocol::layout::names_in(&base) {
            let held = crate::protocol::layout::Worktree::new(base.join(wt)).held();
            out.extend(
                holds::held_in(&held, max)
                    .into_iter()
                    .map(|held| RemoteHeld {
                        host: h.clone(),
                        held,
                    }),
            );
        }
    }
    out.sort_by(|a, b| a.held.id.cmp(&b.held.id));
    out
}

/// The handoff with this id held on another host, if a mirror shows one.
pub fn held_by_id(project: &Project, id: &str) -> Option<RemoteHeld> {
    let (config, me) = control::bridged(project)?;
    held_elsewhere(project, &config.hosts, &me)
        .into_iter()
        .find(|r| r.held.id == id)
}

/// Text for `swarm status`.
pub fn text(s: &SwarmControl) -> String {
    let mut out = String::from("swarm control:\n");
    for h in &s.hosts {
        out.push_str(&format!("  host {:<12} {}", h.host, h.state));
        if let Some(since) = &h.since {
            out.push_str(&format!(" since {since}"));
        }
        if let Some(by) = &h.by {
            out.push_str(&format!(" (last: {by})"));
        }
        out.push('\n');
    }
    for c in &s.controls {
        out.push_str(&format!(
            "  control {} {} by {} on {} at {}: ",
            c.id, c.kind, c.by, c.host, c.at
        ));
        let done: Vec<String> = c
            .applied
            .iter()
            .map(|(h, w)| format!("{h} ({w})"))
            .collect();
        out.push_str(&format!("applied on {}", done.join(", ")));
        if !c.pending.is_empty() {
            out.push_str(&format!("; pending on {}", c.pending.join(", ")));
        }
        for (h, why) in &c.waiting {
            out.push_str(&format!("; on {h} it {why}"));
        }
        out.push('\n');
    }
    for r in &s.refused {
        out.push_str(&format!("  refused control record: {r}\n"));
    }
    for r in &s.held_elsewhere {
        out.push_str(&format!(
            "  held on host {}: {} from {} to {} ({}) sha256 {}  (swarm approve {} / swarm deny {})\n",
            r.host, r.held.id, r.held.from, r.held.to, r.held.kind, r.held.sha256, r.held.id, r.held.id
        ));
    }
    crate::text::escape_lines(&out)
}

/// `swarm audit --check`: a control record of another host that this host
/// has not applied although it applied a later one of that host (one host's
/// records reach every host in order) is a violation; one not applied yet,
/// with nothing later applied, is pending.
pub fn audit(swarm: &Swarm) -> (Vec<Violation>, Vec<Violation>) {
    let project = &swarm.project;
    let Some((config, me)) = control::bridged_in(swarm) else {
        return (Vec::new(), Vec::new());
    };
    // The journal may have been pruned: judge only what it still covers.
    let (evs, oldest) = events(project, &me, &config.hosts);
    let mine = evs.get(&me).map(Vec::as_slice).unwrap_or(&[]);
    let done = |id: &str| mine.iter().any(|e| e.id == id && e.word != "control_sent");
    // A record parked here and not applied since waits (for a clarify's
    // copy): pending, never judged lost.
    let (mut bad, mut pending) = (Vec::new(), Vec::new());
    for e in mine.iter().filter(|e| e.word == "control_waiting") {
        let later = mine
            .iter()
            .any(|x| x.id == e.id && (x.word == "control_applied" || x.word == "control_refused"));
        if !later {
            pending.push(Violation {
                kind: "control_waiting",
                subject: e.id.clone(),
                detail: format!("{} by {} on host {}: {}", e.kind, e.by, e.origin, e.outcome),
            });
        }
    }
    for (h, list) in evs.iter().filter(|(h, _)| **h != me) {
        let sent: Vec<&Ev> = list
            .iter()
            .filter(|e| e.word == "control_sent" && e.origin == *h && e.time >= oldest)
            .collect();
        let newest_done = sent
            .iter()
            .rev()
            .find(|e| done(&e.id))
            .map(|e| e.id.clone());
        for e in sent.iter().filter(|e| !done(&e.id)) {
            let v = Violation {
                kind: "control_not_applied",
                subject: e.id.clone(),
                detail: format!(
                    "{} by {} on host {h} at {} is not in this host's journal",
                    e.kind, e.by, e.time
                ),
            };
            if newest_done.as_ref().is_some_and(|n| *n > e.id) {
                bad.push(Violation {
                    detail: format!("{}, though a later control of host {h} is", v.detail),
                    ..v
                });
            } else {
                pending.push(v);
            }
        }
    }
    (bad, pending)
}
