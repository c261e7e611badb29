//! Accepting connections so no one can take the cockpit away without the
//! token (docs/security.md, "The cockpit"): a request's header must arrive
//! within [`HEADER_TIMEOUT`], and at most [`MAX_CONNECTIONS`] are open at
//! once, far below the descriptor limit. When a new one arrives at the
//! limit, the oldest connection that never showed the token is closed to
//! make room (so unfinished requests cannot crowd out the person); when
//! every open one showed it, the new one is closed. A failed accept (out of
//! descriptors) waits a moment instead of ending the server.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;

/// The longest a client may take to send a request's header (and the
/// longest an idle kept-alive connection stays open).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Open connections at most (the page needs two or three; several tabs and
/// scripts a few more).
pub const MAX_CONNECTIONS: usize = 64;
/// The largest request header read.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Set by the token guard when a request on this connection carried the
/// token (a request extension).
#[derive(Clone)]
pub struct Shown(Arc<AtomicBool>);

impl Shown {
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One open connection: its number, whether it showed the token, and how
/// to close it.
struct Open {
    n: u64,
    shown: Arc<AtomicBool>,
    abort: tokio::task::AbortHandle,
}

/// Serves `router` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, router: axum::Router) {
    let open: Arc<Mutex<VecDeque<Open>>> = Arc::default();
    let mut n = 0u64;
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // EMFILE and the like: the connections in hand end first.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if !make_room(&open) {
            drop(stream);
            continue;
        }
        n += 1;
        let shown = Arc::new(AtomicBool::new(false));
        let flag = Shown(shown.clone());
        let inner = TowerToHyperService::new(router.clone());
        let svc = hyper::service::service_fn(move |mut req: hyper::Request<_>| {
            req.extensions_mut().insert(flag.clone());
            inner.call(req)
        });
        let (mine, list) = (n, open.clone());
        let task = tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
            if let Ok(mut l) = list.lock() {
                l.retain(|o| o.n != mine);
            }
        });
        if let Ok(mut l) = open.lock() {
            l.push_back(Open {
                n,
                shown,
                abort: task.abort_handle(),
            });
        }
    }
}

/// Below the limit, or made so by closing the oldest connection that never
/// showed the token.
fn make_room(open: &Mutex<VecDeque<Open>>) -> bool {
    let Ok(mut l) = open.lock() else {
        return false;
    };
    l.retain(|o| !o.abort.is_finished());
    if l.len() < MAX_CONNECTIONS {
        return true;
    }
    match l.iter().position(|o| !o.shown.load(Ordering::Relaxed)) {
        Some(i) => {
            if let Some(o) = l.remove(i) {
                o.abort.abort();
            }
            true
        }
        None => false,
    }
}

/// Refuses a non-loopback address unless `--allow-remote` was given;
/// `exposes` says what anyone who reaches it with the token could do.
pub(crate) fn check_bind(opts: &super::Options, exposes: &str) -> crate::Result<()> {
    if !opts.bind.is_loopback() && !opts.allow_remote {
        return Err(crate::Error::bad_input(format!(
            "refusing to serve on {} (not a loopback address): anyone who can reach it and learns the token {exposes}\n  hint: add --allow-remote if you mean it, or use --bind 127.0.0.1",
            opts.bind
        )));
    }
    Ok(())
}

/// The single-threaded runtime a server of the swarm runs on.
pub(crate) fn runtime() -> crate::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| crate::Error::internal(format!("cannot start the async runtime: {e}")))
}

/// The listener on `opts`' address, the address it got (port 0: any free
/// one) and its base URL, `http://<host>:<port>`.
pub(crate) async fn bind(
    opts: &super::Options,
) -> crate::Result<(tokio::net::TcpListener, std::net::SocketAddr, String)> {
    let addr = std::net::SocketAddr::new(opts.bind, opts.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| crate::Error::conflict(format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| crate::Error::conflict(format!("{addr}: {e}")))?;
    let host = match local.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    let url = format!("http://{host}:{}", local.port());
    Ok((listener, local, url))
}
