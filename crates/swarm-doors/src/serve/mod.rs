//! `swarm serve`: the cockpit, a live web page for the people running a
//! swarm (docs/cockpit.md). Async lives here only (docs/design.md): axum on a
//! current-thread tokio runtime, every library call (all synchronous file
//! work) in `spawn_blocking`.
//!
//! - `token`: the access token, its 0600 file, the cookie it is exchanged
//!   for on first load, and the request guard (cross-origin refused);
//! - `model`: what the page shows, kept up to date change by change, and
//!   the deltas a page applies;
//! - `folders`: what the role cards count, kept from the watcher's events;
//! - `kept`: the trail `/api/audit` judges, kept from the same changes;
//! - `spend`: tokens and cost per role from the usage journal;
//! - `api`: the JSON endpoints and the actions, each writing the same files
//!   as the CLI command of the same name;
//! - `stream`: the watcher that feeds the model, the page's delta stream,
//!   and server-sent journal lines from `events.jsonl` offsets;
//! - `swarmforge`: SwarmForge's dashboard API (`/api/state`, ...) answered
//!   from this project's own files;
//! - `listen`: accepting connections (timeouts and limits);
//! - `assets/`: the page, embedded with `include_str!` (no JavaScript build).

mod api;
mod cancel;
mod folders;
pub mod kept;
pub(crate) mod listen;
pub mod model;
pub mod spend;
mod stream;
mod swarmforge;
mod token;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::protocol::layout::Project;

/// How a server of the swarm listens (`swarm serve`, `swarm a2a`).
#[derive(Clone, Debug)]
pub struct Options {
    pub bind: IpAddr,
    pub port: u16,
    /// A non-loopback `bind` needs this.
    pub allow_remote: bool,
}

/// What every handler shares.
pub struct App {
    pub project: Project,
    pub token: String,
    /// The port served: a request's `Host` must name it (token::guard).
    pub port: u16,
    /// A tick per file event in the watched folders (see `stream`).
    pub ticks: tokio::sync::broadcast::Sender<()>,
    /// What the page shows, and each change to it as it happens.
    pub model: Mutex<model::Model>,
    pub deltas: tokio::sync::broadcast::Sender<Arc<model::Delta>>,
    /// The fingerprint of each held handoff as `GET /api/state` first
    /// showed it: what an approval through SwarmForge's API without a
    /// sha256 approves (content changed since is refused).
    pub shown: Mutex<std::collections::HashMap<String, String>>,
    /// The trail `/api/audit` judges, kept from the watcher's changes.
    pub kept: Mutex<kept::Kept>,
}

/// Checks the address, writes the token, prints the URL and serves until
/// killed. `on_url` gets the URL once the socket is bound.
pub fn run(project: Project, opts: &Options, on_url: &mut dyn FnMut(&str)) -> Result<()> {
    listen::check_bind(opts, "controls the swarm")?;
    let token = token::create(&project)?;
    let model = model::Model::open(&project)?;
    listen::runtime()?.block_on(async move {
        let (listener, local, url) = listen::bind(opts).await?;
        let (ticks, _) = tokio::sync::broadcast::channel(16);
        let (deltas, _) = tokio::sync::broadcast::channel(1024);
        let app = Arc::new(App {
            project,
            token,
            port: local.port(),
            ticks,
            model: Mutex::new(model),
            deltas,
            shown: Mutex::default(),
            kept: Mutex::default(),
        });
        stream::watch(app.clone());
        on_url(&format!("{url}/?token={}", app.token));
        listen::serve(listener, api::router(app, swarmforge::routes())).await;
        Ok(())
    })
}
