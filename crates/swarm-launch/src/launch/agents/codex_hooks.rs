//! Trusting the turn-end hook `swarm up` installs for a Codex role
//! (docs/agents.md, "Trusting the worktrees").
//!
//! Codex runs a project hook (`<worktree>/.codex/hooks.json`) only once a
//! person trusted it in its `/hooks` review; it records that as
//! `[hooks.state."<key>"] trusted_hash = "sha256:…"` in `CODEX_HOME`'s
//! `config.toml`. The hash's input is not documented, so it is not computed
//! here: Codex's own app server reports it. `codex app-server` speaks
//! JSON-RPC 2.0, one JSON object per line on stdio: `initialize`, the
//! `initialized` notification, then `hooks/list` with `{"cwds": [<worktree>]}`
//! answers every hook Codex would run there with its `key`, `command`,
//! `currentHash` and `trustStatus`. Only our own hook (its command is the
//! one `swarm up` writes, from that worktree's hooks file) is trusted.
//!
//! The app server's output is untrusted: each line is bounded, the whole
//! exchange has a deadline, and the child is killed when it ends.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::error::{Error, Result};

/// JSON-RPC's id key (the app server's protocol, not a message header).
const RPC_ID: &str = "id";

/// How long the app server may take to answer (it starts in ~1 s).
const DEADLINE: Duration = Duration::from_secs(20);
/// The longest line read from it.
const MAX_LINE: usize = 4 * 1024 * 1024;

/// One hook as `hooks/list` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub command: String,
    pub source_path: PathBuf,
    pub current_hash: String,
    pub trusted: bool,
}

/// The key prefix of a hook given on the command line (`-c hooks.…`).
pub const SESSION_FLAGS: &str = "/<session-flags>/config.toml:";

/// The `-c` value that gives Codex the swarm's `Stop` hook on its command
/// line. Codex loads a project's `.codex/hooks.json` only from the
/// repository's main checkout, never from a linked worktree (seen with
/// 0.171: `hooks/list` in `.worktrees/<wt>` lists the main checkout's file
/// and not the worktree's), so a role in its own worktree gets its hook
/// this way; Codex reports it under the key [`SESSION_FLAGS`]`stop:0:0`.
pub fn session_hook(command: &str) -> String {
    format!(
        "hooks.Stop=[{{hooks=[{{type=\"command\",command={},timeout=30}}]}}]",
        serde_json::to_string(command).unwrap_or_default()
    )
}

/// The hooks Codex (`program`, with `args` before `app-server`) would run
/// in `cwd` with `codex_home`.
pub fn list(program: &str, args: &[String], codex_home: &Path, cwd: &Path) -> Result<Vec<Listed>> {
    let mut child = Command::new(program)
        .args(args)
        .arg("app-server")
        .current_dir(cwd)
        .env("CODEX_HOME", codex_home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::process(format!("cannot run `{program} app-server`: {e}")))?;
    let result = exchange(&mut child, cwd);
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn exchange(child: &mut std::process::Child, cwd: &Path) -> Result<Vec<Listed>> {
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Error::process("codex app-server: no pipes"));
    };
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match std::io::Read::take(&mut r, MAX_LINE as u64 + 1).read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) if n > MAX_LINE => return,
                Ok(_) => {
                    if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        }
    });
    let mut send = |v: Value| -> Result<()> {
        let mut line = v.to_string();
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .map_err(|e| Error::process(format!("codex app-server: {e}")))
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "swarm-handoff", "version": env!("CARGO_PKG_VERSION")}}}))?;
    let end = Instant::now() + DEADLINE;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let msg = rx.recv_timeout(left).map_err(|_| {
            Error::process(format!(
                "codex app-server gave no hook list within {}s",
                DEADLINE.as_secs()
            ))
        })?;
        match msg.get(RPC_ID).and_then(Value::as_i64) {
            Some(1) => {
                if let Some(e) = msg.get("error") {
                    return Err(Error::process(format!("codex app-server: initialize: {e}")));
                }
                send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}))?;
                send(json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list",
                    "params": {"cwds": [cwd]}}))?;
            }
            Some(2) => return parse(&msg),
            _ => {}
        }
    }
}

/// The hooks of a `hooks/list` response.
fn parse(msg: &Value) -> Result<Vec<Listed>> {
    if let Some(e) = msg.get("error") {
        return Err(Error::process(format!("codex app-server: hooks/list: {e}")));
    }
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Ok(msg["result"]["data"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|d| d["hooks"].as_array().into_iter().flatten())
        .map(|h| Listed {
            key: s(h, "key"),
            command: s(h, "command"),
            source_path: PathBuf::from(s(h, "sourcePath")),
            current_hash: s(h, "currentHash"),
            trusted: matches!(
                h.get("trustStatus").and_then(Value::as_str),
                Some("trusted" | "managed")
            ),
        })
        .filter(|h| !h.key.is_empty() && h.current_hash.starts_with("sha256:"))
        .collect())
}

/// `text` (a Codex `config.toml`) with `key` trusted at `hash`; every other
/// table and comment kept.
pub fn with_trust(text: &str, key: &str, hash: &str) -> Result<String> {
    let mut doc = parse_toml(text)?;
    let hooks = table(doc.as_table_mut(), "hooks");
    let state = table(hooks, "state");
    let entry = table(state, key);
    entry.insert("trusted_hash", toml_edit::value(hash));
    Ok(doc.to_string())
}

/// `text` without the hook trust of every key starting with `prefix`, and
/// how many were removed.
pub fn without_trust(text: &str, prefix: &str) -> Result<(String, usize)> {
    let mut doc = parse_toml(text)?;
    let mut n = 0;
    if let Some(state) = doc
        .get_mut("hooks")
        .and_then(|h| h.as_table_mut())
        .and_then(|h| h.get_mut("state"))
        .and_then(|s| s.as_table_mut())
    {
        let keys: Vec<String> = state
            .iter()
            .map(|(k, _)| k.to_string())
            .filter(|k| k.starts_with(prefix))
            .collect();
        for k in keys {
            state.remove(&k);
            n += 1;
        }
    }
    Ok((doc.to_string(), n))
}

fn parse_toml(text: &str) -> Result<toml_edit::DocumentMut> {
    text.parse::<toml_edit::DocumentMut>()
        .map_err(|e| Error::env(format!("not valid TOML: {e}")))
}

/// The table `key` of `t`, made (implicit) when missing.
fn table<'a>(t: &'a mut toml_edit::Table, key: &str) -> &'a mut toml_edit::Table {
    if !t.get(key).is_some_and(|i| i.is_table()) {
        let mut new = toml_edit::Table::new();
        new.set_implicit(true);
        t.insert(key, toml_edit::Item::Table(new));
    }
    t.get_mut(key)
        .and_then(|i| i.as_table_mut())
        .expect("just made")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_added_and_removed_keeping_everything_else() {
        let before = "# mine\nmodel = \"x\"\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
        let on = with_trust(before, "/w/.codex/hooks.json:stop:0:0", "sha256:ab").unwrap();
        assert!(on.starts_with(before), "{on}");
        assert!(
            on.contains(
                "[hooks.state.\"/w/.codex/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:ab\""
            ),
            "{on}"
        );
        let (off, n) = without_trust(&on, "/w/.codex/hooks.json:").unwrap();
        assert_eq!(n, 1);
        assert!(
            !off.contains("sha256:ab") && off.contains("trust_level"),
            "{off}"
        );
        assert!(with_trust("[broken", "k", "h").is_err());
    }

    #[test]
    fn a_list_response_is_read_and_bad_entries_dropped() {
        let msg = json!({"id": 2, "result": {"data": [{"cwd": "/w", "hooks": [
            {"key": "/w/.codex/hooks.json:stop:0:0", "command": "c", "sourcePath": "/w/.codex/hooks.json",
             "currentHash": "sha256:0d", "trustStatus": "untrusted"},
            {"key": "k2", "command": "c", "currentHash": "md5:x", "trustStatus": "trusted"},
            {"command": "no key", "currentHash": "sha256:1"}
        ]}]}});
        let l = parse(&msg).unwrap();
        assert_eq!(l.len(), 1);
        assert!(!l[0].trusted);
        assert_eq!(l[0].current_hash, "sha256:0d");
    }
}
