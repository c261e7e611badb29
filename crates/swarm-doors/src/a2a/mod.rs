//! `swarm a2a`: the swarm's roles as A2A v1.0 agents (docs/a2a.md), so an
//! outside agent can hand one of them work with any A2A client. Every A2A
//! task is a handoff from the configured outside sender (`a2a: {sender: R}`
//! in swarm.yaml) to the role, queued exactly once per A2A message id, and
//! audited like any other message; its state is read from the handoff's
//! files. Async lives here and in the other network doors only
//! (docs/design.md): axum on a current-thread runtime, file work in
//! `spawn_blocking`, the tracker and the webhook pusher on their own threads.
//!
//! - `store`: what the server keeps in `.swarmforge/a2a/` (token, task
//!   records, event logs, push configs and their acknowledgements);
//! - `task`: a task's state and artifacts from the handoff's files, in A2A's
//!   JSON;
//! - `track`: the tracker that logs each task's events, and the pusher;
//! - `rpc`: the JSON-RPC envelope, error codes and the methods;
//! - `card`: the Agent Cards;
//! - `http`: routes, the bearer token, blocking sends and SSE streams.

mod card;
mod http;
mod rpc;
mod store;
mod task;
mod track;

use std::net::SocketAddr;
use std::sync::{mpsc, Arc};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::config::Config;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;

pub use store::Store;

/// How `swarm a2a` listens: as the cockpit does.
pub use crate::serve::Options;

/// What every handler shares.
pub struct App {
    pub project: Project,
    pub store: Store,
    pub token: String,
    /// The address bound (for cards when a request's Host is unusable).
    pub addr: SocketAddr,
    pub tracker: track::Tracker,
}

/// The checks before serving: a sender that roles.tsv knows, at least one
/// offered role.
fn check(project: &Project) -> Result<(String, Vec<String>)> {
    let config = Config::load(&project.config_file())?;
    let file = project.config_file();
    let Some(sender) = config.a2a.sender.clone() else {
        return Err(Error::bad_file_hint(&file, "no a2a sender: every A2A task is a handoff from one role", "add `a2a: {sender: <role>}` naming a role of roles.tsv (a human role, say `client`), see docs/a2a.md"));
    };
    let roles = Roles::load(&project.roles_tsv())?;
    if roles.find(&sender).is_none() {
        return Err(Error::bad_file_hint(
            &file,
            format!(
                "a2a sender '{sender}' is not a role of {}",
                project.roles_tsv().display()
            ),
            "add it to roles.tsv, or name another role",
        ));
    }
    let offered: Vec<String> = card::offered(project, &config)?
        .into_iter()
        .map(|r| r.name)
        .collect();
    if offered.is_empty() {
        return Err(Error::bad_file_hint(
            &file,
            "no role has `a2a: true`, so there is nothing to offer",
            "under roles:, add `a2a: true` to each role outside agents may hand work to",
        ));
    }
    Ok((sender, offered))
}

/// Checks the setup, takes the server lock, prints the address (never the
/// token) and serves until killed. `on_url` gets the base URL once bound.
pub fn run(project: Project, opts: &Options, on_url: &mut dyn FnMut(&str)) -> Result<()> {
    crate::serve::listen::check_bind(opts, "can hand the swarm work")?;
    check(&project)?;
    let store = Store::new(&project);
    store.ensure()?;
    let lock_path = store.server_lock();
    let Some(_server) = fsx::try_lock(&lock_path).map_err(|e| Error::io(&lock_path, e))? else {
        return Err(Error::conflict(format!(
            "another swarm a2a serves this project ({} is locked{})",
            lock_path.display(),
            fsx::lock_holder(&lock_path)
                .map(|p| format!(" by pid {p}"))
                .unwrap_or_default()
        )));
    };
    let token = store.token()?;
    crate::serve::listen::runtime()?.block_on(async move {
        let (listener, local, url) = crate::serve::listen::bind(opts).await?;
        let (wake, woken) = mpsc::channel();
        let app = Arc::new(App {
            project,
            store: store.clone(),
            token,
            addr: local,
            tracker: track::Tracker::new(wake),
        });
        track::push(store, woken)
            .map_err(|e| Error::internal(format!("cannot start the webhook pusher: {e}")))?;
        track::watch(app.clone())
            .map_err(|e| Error::internal(format!("cannot start the tracker: {e}")))?;
        on_url(&url);
        // The cockpit's accept loop: header timeout, bounded connections,
        // those that never showed the token closed first.
        crate::serve::listen::serve(listener, http::router(app)).await;
        Ok(())
    })
}
