//! Whether the NATS server syncs each JetStream write to disk before its
//! PubAck (`sync_interval: always`). The bridge treats a PubAck as durable;
//! with JetStream's default (a sync every two minutes) an OS crash or power
//! loss on the server can lose acknowledged messages (docs/bridge.md, "What
//! a PubAck means"). Only the server's monitoring endpoint (`/varz`) shows
//! it, so this looks only when swarm.yaml names it (`bridge_monitor:`).

use std::time::Duration;

use super::{Context, Finding};

/// Largest `/varz` answer read.
const MAX_VARZ_BYTES: u64 = 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(3);

fn varz(url: &str) -> crate::error::Result<serde_json::Value> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .max_redirects(0)
        .user_agent("swarm-handoff doctor")
        .build()
        .into();
    let mut resp = agent.get(url).call().map_err(crate::Error::process)?;
    let text = resp
        .body_mut()
        .with_config()
        .limit(MAX_VARZ_BYTES)
        .read_to_string()
        .map_err(crate::Error::process)?;
    serde_json::from_str(&text).map_err(|e| crate::Error::process(format!("not JSON: {e}")))
}

/// `BRIDGE_SYNC_INTERVAL` when the server says it does not sync every
/// write, `BRIDGE_MONITOR_UNREADABLE` when `bridge_monitor` cannot be read.
pub fn bridge_sync(cx: &Context) -> Vec<Finding> {
    let (Some(_), Some(monitor)) = (&cx.config.bridge, &cx.config.bridge_monitor) else {
        return Vec::new();
    };
    let url = format!("{}/varz", monitor.trim_end_matches('/'));
    let v = match varz(&url) {
        Ok(v) => v,
        Err(e) => {
            return vec![Finding::new(
                "BRIDGE_MONITOR_UNREADABLE",
                format!("cannot read the NATS server's {url}: {e}"),
                "start nats-server with its monitoring port reachable from this host (`-m 8222`, or `http: 8222` in its config), or remove bridge_monitor from swarm.yaml",
            )
            .at(cx.project.config_file())];
        }
    };
    let version = v["version"].as_str().unwrap_or("?");
    let js = &v["jetstream"]["config"];
    if js["sync_always"] == true {
        return Vec::new();
    }
    let every = js["sync_interval"]
        .as_u64()
        .map_or("every two minutes (the default)".to_string(), |ns| {
            format!("every {} s", ns / 1_000_000_000)
        });
    vec![Finding::new(
        "BRIDGE_SYNC_INTERVAL",
        format!(
            "the NATS server at {monitor} (nats-server {version}) syncs JetStream to disk {every}, not on every write: its PubAck does not mean the message is on disk, and an OS crash or power loss there can lose messages the bridge counts as delivered"
        ),
        "set `jetstream { sync_interval: always }` in the server's config (nats-server 2.10 or newer; see docs/bridge.md, \"What a PubAck means\")",
    )
    .at(cx.project.config_file())]
}
