//! The live feed: server-sent events.
//!
//! One thread watches the project's folders (the daemon's journal folder,
//! `.swarmforge/` for the pause file, and every worktree's queue folders)
//! with notify and broadcasts a tick per change. Each event-stream
//! connection reads `events.jsonl` from an offset (its end when the stream
//! opened, or `?from=N`, a log offset as `swarm events --since` takes)
//! across rotations with [`EventReader`], and on each tick sends the new
//! lines (`event: journal`, `id:` the offset after the line) and one
//! `event: changed` so the page re-reads what it shows. No polling: a
//! connection sleeps until a tick (or the keep-alive).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::protocol::logfile;
use crate::protocol::trail::watch::DirWatch;
use crate::views::events::EventReader;

use super::App;

/// Starts the watcher thread (it lives as long as the process).
pub fn watch(app: Arc<App>) {
    let p = app.project.clone();
    let mut dirs = vec![p.daemon_dir(), p.swarmforge(), p.approvals_dir()];
    dirs.extend(crate::protocol::trail::watch::queue_dirs(&p));
    dirs.sort();
    dirs.dedup();
    let spawned = std::thread::Builder::new()
        .name("cockpit-watch".into())
        .spawn(move || {
            let mut w = DirWatch::new(dirs);
            loop {
                let wake = w.wait_for(Duration::from_secs(30));
                if wake.rescan || !wake.paths.is_empty() {
                    // Nobody listening is fine.
                    let _ = app.ticks.send(());
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("swarm serve: no live updates: cannot start the watcher: {e}");
    }
}

#[derive(Deserialize)]
pub struct From {
    from: Option<u64>,
}

/// Where the journal ends now (the next line's offset).
fn end_offset(path: &std::path::Path) -> u64 {
    logfile::files(path)
        .ok()
        .and_then(|f| f.last().map(logfile::Part::end))
        .or_else(|| logfile::live_start(path).ok())
        .unwrap_or(0)
}

/// `GET /api/events`: the stream.
/// A browser reconnecting sends the last `id:` it saw, which is the offset to
/// resume at; `?from=` wins over it; an offset no longer valid (rotated away)
/// in the header falls back to the end rather than failing the reconnect.
pub async fn events(
    State(app): State<Arc<App>>,
    Query(q): Query<From>,
    headers: axum::http::HeaderMap,
) -> Response {
    let path = app.project.events_file();
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // Subscribed before the first read: a change in between is not missed.
    let mut ticks = app.ticks.subscribe();
    let opened = tokio::task::spawn_blocking(move || match (q.from, resume) {
        (Some(n), _) => EventReader::new(&path, n),
        (None, Some(n)) => {
            EventReader::new(&path, n).or_else(|_| EventReader::new(&path, end_offset(&path)))
        }
        (None, None) => EventReader::new(&path, end_offset(&path)),
    })
    .await;
    let mut reader = match opened {
        Ok(Ok(r)) => r,
        Ok(Err(msg)) => return super::token::refuse(StatusCode::BAD_REQUEST, &msg),
        Err(e) => return super::token::refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(256);
    tokio::spawn(async move {
        let hello = serde_json::json!({"offset": reader.offset}).to_string();
        if tx
            .send(Event::default().event("hello").data(hello))
            .await
            .is_err()
        {
            return;
        }
        loop {
            let read = tokio::task::spawn_blocking(move || {
                let mut lines = Vec::new();
                let _ = reader.poll(&mut |l, next| {
                    lines.push((String::from_utf8_lossy(l).trim_end().to_string(), next));
                    Ok(())
                });
                (reader, lines)
            })
            .await;
            let Ok((r, lines)) = read else { return };
            reader = r;
            for (line, next) in lines {
                let ev = Event::default()
                    .event("journal")
                    .id(next.to_string())
                    .data(line);
                if tx.send(ev).await.is_err() {
                    return;
                }
            }
            tokio::select! {
                t = ticks.recv() => {
                    if matches!(t, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                        return;
                    }
                    if tx.send(Event::default().event("changed").data("{}")).await.is_err() {
                        return;
                    }
                }
                _ = tx.closed() => return,
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
