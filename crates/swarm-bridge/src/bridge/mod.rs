//! The bridge (docs/bridge.md): a swarm across hosts over NATS
//! JetStream, with the daemon unchanged. A role on another host is a local
//! proxy worktree (`.swarmforge/bridge/out/<role>/`) that the daemon delivers
//! into like any inbox; the bridge publishes each proxy copy to JetStream and
//! moves it to the proxy's `sent/` only after the PubAck. On the receiving
//! host it writes each message into the recipient's `inbox/new` (skipping a
//! copy the inbox already holds) and acks only after that write is durable.
//!
//! File logic is synchronous (`outbound`, `inbound`, `events`); only `net`
//! is async and runs it through `spawn_blocking`.

pub mod control;
#[cfg(test)]
mod control_crash;
pub mod control_index;
pub mod control_receive;
pub mod control_view;
pub mod control_wait;
pub mod events;
pub mod inbound;
pub mod outbound;
pub mod refusals;
pub mod swarmwide;
pub mod trail;
pub mod vouch;

mod net;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Between the servers of `bridge:` (NATS seeds), not a role list.
const URL_SEPARATOR: char = ',';

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::config::Config;
use crate::protocol::layout::Project;
use crate::text::escape;

pub use net::run;

/// Why the bridge refuses what another host (or anyone publishing on its
/// subjects) sent, or a copy it cannot publish: untrusted input that is
/// not what this version writes. Logged or journaled as the text, never
/// retried.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

impl From<&str> for Refused {
    fn from(why: &str) -> Refused {
        Refused(why.to_string())
    }
}

/// Largest credentials file read.
const MAX_CREDS_BYTES: u64 = 64 * 1024;

/// Everything the bridge of one host needs to know.
#[derive(Clone, Debug)]
pub struct Settings {
    pub project: Project,
    pub config: Config,
    /// This checkout's host.
    pub host: String,
    pub url: String,
}

impl Settings {
    /// From `swarm.yaml` and this checkout's host; an error when no bridge is
    /// configured.
    pub fn load(project: &Project) -> Result<Settings> {
        let config = Config::load(&project.config_file())?;
        let Some(url) = config.bridge.clone() else {
            return Err(Error::bad_file_hint(
                project.config_file(),
                "no `bridge:` is set, so this swarm has no bridge to run",
                "set `bridge: nats://host:4222` and `hosts:` (see docs/bridge.md)",
            ));
        };
        let host = crate::protocol::config::this_host(project, &config)?.ok_or_else(|| {
            Error::bad_file_hint(
                project.config_file(),
                "the bridge needs `hosts:`",
                "list every host under `hosts:` (see docs/bridge.md)",
            )
        })?;
        Ok(Settings {
            project: project.clone(),
            config,
            host,
            url,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.bridge_name
    }

    /// The JetStream stream holding the swarm's messages and events.
    pub fn stream(&self) -> String {
        format!("SWARM-{}", self.name())
    }

    /// The servers `bridge:` names (a cluster's seeds, comma-separated).
    pub fn servers(&self) -> Vec<&str> {
        self.url
            .split(URL_SEPARATOR)
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .collect()
    }

    /// The stream's replicas: `bridge_replicas`, else one per server the
    /// URL names (a cluster's seeds), at most JetStream's 5. A single
    /// replica on a cluster would make the one server holding it a single
    /// point of loss and of unavailability (docs/bridge.md, "A cluster").
    pub fn replicas(&self) -> usize {
        let named = self.servers().len();
        self.config
            .bridge_replicas
            .map_or(named, |r| r as usize)
            .clamp(1, 5)
    }

    pub fn to_subject(&self, host: &str, role: &str) -> String {
        format!("swarm.{}.to.{host}.{role}", self.name())
    }

    /// The subjects of messages for this host's roles.
    pub fn inbound_filter(&self) -> String {
        format!("swarm.{}.to.{}.>", self.name(), self.host)
    }

    /// Where host `host` publishes its control records (docs/bridge.md,
    /// "One control").
    pub fn control_subject(&self, host: &str) -> String {
        format!("swarm.{}.control.{host}", self.name())
    }

    pub fn events_subject(&self, host: &str) -> String {
        format!("swarm.{}.events.{host}", self.name())
    }

    /// The role a subject of this host's inbound filter names.
    pub fn subject_role<'a>(&self, subject: &'a str) -> Option<&'a str> {
        let prefix = format!("swarm.{}.to.{}.", self.name(), self.host);
        subject.strip_prefix(prefix.as_str())
    }
}

/// How the bridge authenticates. Never logged, never on a command line.
#[derive(Clone)]
pub enum Credentials {
    None,
    /// A NATS `.creds` file (JWT and NKey seed).
    CredsFile(PathBuf),
    Token(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Credentials::None => "none",
            Credentials::CredsFile(_) => "creds file",
            Credentials::Token(_) => "token",
        })
    }
}

/// `bridge_credentials_file` (relative to the project root; a `.creds` file
/// or a token on its first line), else `SWARM_NATS_CREDS` (a `.creds` file),
/// else `SWARM_NATS_TOKEN`, else none.
pub fn credentials(s: &Settings) -> Result<Credentials> {
    if let Some(f) = &s.config.bridge_credentials_file {
        let path = s.project.root.join(f);
        refuse_inside_project(&s.project.root, &path)?;
        return creds_from_file(&path);
    }
    if let Some(p) = std::env::var_os("SWARM_NATS_CREDS").filter(|v| !v.is_empty()) {
        return Ok(Credentials::CredsFile(PathBuf::from(p)));
    }
    match std::env::var("SWARM_NATS_TOKEN") {
        Ok(t) if !t.is_empty() => Ok(Credentials::Token(t)),
        _ => Ok(Credentials::None),
    }
}

/// A credentials file inside the project is readable by every agent (the
/// sandbox shows the project read-only), and with it an agent could speak
/// as the swarm on the bridge: publish a control record approving its own
/// held handoff on another host (docs/security.md, "Secrets").
fn refuse_inside_project(root: &Path, path: &Path) -> Result<()> {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    if canon(path).starts_with(canon(root)) {
        return Err(Error::bad_file_hint(
            path,
            "the bridge credentials file is inside the project, where every agent can read it",
            "move it outside the project (for example ~/.config/swarm/nats.creds, mode 600) and name that absolute path in bridge_credentials_file, or set SWARM_NATS_CREDS or SWARM_NATS_TOKEN",
        ));
    }
    Ok(())
}

fn creds_from_file(path: &Path) -> Result<Credentials> {
    let bytes = fsx::read_bounded(path, MAX_CREDS_BYTES).map_err(|e| {
        Error::bad_file_hint(
            path,
            format!("cannot read the bridge credentials: {e}"),
            "bridge_credentials_file names a NATS .creds file or a file holding a token",
        )
    })?;
    let text = String::from_utf8_lossy(&bytes);
    if text.contains("-----BEGIN NATS USER JWT-----") {
        return Ok(Credentials::CredsFile(path.to_path_buf()));
    }
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        return Err(Error::bad_file_hint(
            path,
            "the bridge credentials file is empty",
            "put a token on its first line, or use a NATS .creds file",
        ));
    }
    Ok(Credentials::Token(token))
}

/// `.swarmforge/bridge/bridge.log`: one escaped line per event, the same
/// shape as handoffd.log (`<time> <word> <detail>`). A wait is logged
/// `deferred` once per subject and cause, and `resumed` when it clears; a
/// NATS client event of the same kind as the last one is counted, not
/// logged (a server away gives one per reconnect attempt), until another
/// kind comes. The bridge is the file's only writer and rotates it like the
/// daemon's logs (`logs:` in swarm.yaml).
#[derive(Debug)]
pub struct Log {
    path: PathBuf,
    deferred: Mutex<HashMap<String, String>>,
    /// Held for every append and rotation (logfile::rotate_if_full).
    policy: Mutex<crate::sys::logfile::Policy>,
    /// The kind of the last NATS event logged and how many of that kind
    /// were left out since.
    last_event: Mutex<(String, u64)>,
}

impl Log {
    pub fn new(project: &Project) -> Log {
        let logs = Config::load(&project.config_file())
            .map(|c| c.logs)
            .unwrap_or_default();
        Log {
            path: project.bridge_log(),
            deferred: Mutex::new(HashMap::new()),
            policy: Mutex::new(logs.policy()),
            last_event: Mutex::new((String::new(), 0)),
        }
    }

    pub fn line(&self, word: &str, detail: &str) {
        let l = format!("{} {word} {}\n", clock::iso_now(), escape(detail));
        let policy = self.policy.lock().unwrap_or_else(|e| e.into_inner());
        let result = fsx::append_len(&self.path, l.as_bytes()).and_then(|len| {
            crate::sys::logfile::rotate_if_full(&self.path, len, *policy).map(|_| ())
        });
        if let Err(e) = result {
            eprintln!(
                "swarm bridge: cannot append to {}: {e}",
                self.path.display()
            );
        }
    }

    /// Logs a NATS client event (`nats <event>`) unless it is of the same
    /// kind (the text before its first `:`) as the last one logged.
    pub fn event(&self, text: &str) {
        let kind = text.split(':').next().unwrap_or(text).to_string();
        let mut last = self.last_event.lock().unwrap_or_else(|e| e.into_inner());
        if last.0 == kind {
            last.1 += 1;
            return;
        }
        let left_out = std::mem::replace(&mut *last, (kind, 0));
        drop(last);
        if left_out.1 > 0 {
            self.line("nats", &format!("{} more like: {}", left_out.1, left_out.0));
        }
        self.line("nats", text);
    }

    /// Logs `deferred <key> <reason>` unless this key already waits for
    /// this reason.
    pub fn deferred(&self, key: &str, reason: &str) {
        let mut d = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
        if d.get(key).map(String::as_str) == Some(reason) {
            return;
        }
        d.insert(key.to_string(), reason.to_string());
        drop(d);
        self.line("deferred", &format!("{key} {reason}"));
    }

    /// Logs `deferred <key> <reason>` unless this key already waits, for
    /// whatever reason (an outage gives a different error on every retry).
    pub fn deferred_once(&self, key: &str, reason: &str) {
        let mut d = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
        if d.contains_key(key) {
            return;
        }
        d.insert(key.to_string(), reason.to_string());
        drop(d);
        self.line("deferred", &format!("{key} {reason}"));
    }

    /// The key no longer waits; logs `resumed` when it did.
    pub fn cleared(&self, key: &str) {
        let was = self
            .deferred
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key)
            .is_some();
        if was {
            self.line("resumed", key);
        }
    }
}

#[cfg(test)]
mod log_tests {
    use super::*;

    #[test]
    fn events_of_one_kind_are_counted_and_the_log_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::new(dir.path());
        std::fs::create_dir_all(project.bridge_log().parent().unwrap()).unwrap();
        std::fs::write(project.config_file(), "logs: {max_bytes: 2000, keep: 2}\n").unwrap();
        let log = Log::new(&project);
        for i in 0..50 {
            log.event(&format!("client error: attempt {i}"));
        }
        log.event("connected");
        let text = std::fs::read_to_string(project.bridge_log()).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.contains("49 more like: client error"), "{text}");
        for i in 0..100 {
            log.line("received", &format!("message {i} from somewhere"));
        }
        let parts = crate::sys::logfile::rotated(&project.bridge_log()).unwrap();
        assert_eq!(parts.len(), 2, "{parts:?}");
        let live = std::fs::metadata(project.bridge_log()).unwrap().len();
        assert!(live < 2000);
    }
}

#[cfg(test)]
mod replica_tests {
    use super::*;

    fn settings(url: &str, replicas: Option<u32>) -> Settings {
        let config = Config {
            bridge_replicas: replicas,
            ..Config::default()
        };
        Settings {
            project: Project::new(std::path::Path::new("/nonexistent")),
            config,
            host: "a".into(),
            url: url.into(),
        }
    }

    #[test]
    fn a_cluster_named_in_full_gets_a_replica_per_server_at_most_five() {
        assert_eq!(settings("nats://a:4222", None).replicas(), 1);
        assert_eq!(
            settings("nats://a:1,nats://b:1,nats://c:1", None).replicas(),
            3
        );
        let seven = ["nats://x:1"; 7].join(",");
        assert_eq!(settings(&seven, None).replicas(), 5);
        assert_eq!(
            settings("nats://a:1,nats://b:1,nats://c:1", Some(1)).replicas(),
            1
        );
        assert_eq!(settings("nats://a:4222", Some(3)).replicas(), 3);
    }
}
