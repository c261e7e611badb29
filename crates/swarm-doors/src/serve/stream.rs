//! The live feed: server-sent events.
//!
//! One thread watches the project's folders (the daemon's journal folder,
//! `.swarmforge/` for the pause file, telemetry, and every worktree's queue
//! folders) with notify, applies each change to the model once and
//! broadcasts its deltas (`/api/live`, what the page uses) and a tick.
//!
//! `/api/events` is the raw journal for scripts: each event-stream
//! connection reads `events.jsonl` from an offset (its end when the stream
//! opened, or `?from=N`, a log offset as `swarm events --since` takes)
//! across rotations with [`EventReader`], and on each tick sends the new
//! lines (`event: journal`, `id:` the offset after the line) and one
//! `event: changed`. A connection sleeps until a tick (or the keep-alive).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::sys::log_reader::EventReader;
use crate::sys::watch::DirWatch;

use super::model::Delta;
use super::App;

/// Starts the watcher thread (it lives as long as the process): each wake
/// is applied to the model once, for every open page, and its deltas are
/// broadcast.
pub fn watch(app: Arc<App>) {
    let dirs = match app.model.lock() {
        Ok(m) => m.watched(),
        Err(_) => return,
    };
    let spawned = std::thread::Builder::new()
        .name("cockpit-watch".into())
        .spawn(move || {
            let mut w = DirWatch::new(dirs);
            loop {
                // Agents' states (a pane's output, a dialog) change without a
                // file event: a short wait keeps the cards current.
                let wake = w.wait_for(REFRESH);
                let deltas = match app.model.lock() {
                    Ok(mut m) => m.apply(&wake),
                    Err(_) => return,
                };
                if let Ok(mut k) = app.kept.lock() {
                    k.note(&wake);
                }
                for d in deltas {
                    let _ = app.deltas.send(Arc::new(d));
                }
                if !wake.paths.is_empty() {
                    // Nobody listening is fine.
                    let _ = app.ticks.send(());
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("swarm serve: no live updates: cannot start the watcher: {e}");
    }
}

/// How often the cards are looked at when no file changes.
const REFRESH: Duration = Duration::from_secs(2);

#[derive(Deserialize)]
pub struct Since {
    since: Option<u64>,
}

fn sse(d: &Delta) -> Event {
    Event::default()
        .event(d.event)
        .id(d.seq.to_string())
        .data(d.data.clone())
}

/// `GET /api/live?since=SEQ`: the deltas after the snapshot at `SEQ` (or
/// after `Last-Event-ID` on a reconnect), then each as it happens. When
/// some are no longer kept, one `reset` event tells the page to load a new
/// snapshot.
pub async fn live(
    State(app): State<Arc<App>>,
    Query(q): Query<Since>,
    headers: axum::http::HeaderMap,
) -> Response {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // Subscribed before the backlog is taken: nothing falls in between.
    let mut rx_deltas = app.deltas.subscribe();
    let after = resume.or(q.since);
    let backlog = match app.model.lock() {
        Ok(m) => after.map_or(Some(Vec::new()), |s| m.since(s)),
        Err(_) => None,
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(256);
    tokio::spawn(async move {
        let Some(backlog) = backlog else {
            let _ = tx.send(Event::default().event("reset").data("{}")).await;
            return;
        };
        // A delta the page already has (in its snapshot or the backlog) may
        // still be queued on the subscription: it is not sent twice.
        let mut last = after.unwrap_or(0);
        for d in &backlog {
            last = d.seq;
            if tx.send(sse(d)).await.is_err() {
                return;
            }
        }
        if tx
            .send(Event::default().event("hello").data("{}"))
            .await
            .is_err()
        {
            return;
        }
        loop {
            tokio::select! {
                d = rx_deltas.recv() => match d {
                    Ok(d) if d.seq > last => {
                        last = d.seq;
                        if tx.send(sse(&d)).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let _ = tx.send(Event::default().event("reset").data("{}")).await;
                        return;
                    }
                    Err(_) => return,
                },
                _ = tx.closed() => return,
            }
        }
    });
    sse_response(rx)
}

#[derive(Deserialize)]
pub struct From {
    from: Option<u64>,
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
        (None, Some(n)) => EventReader::new(&path, n)
            .or_else(|_| EventReader::new(&path, crate::sys::logfile::end(&path))),
        (None, None) => EventReader::new(&path, crate::sys::logfile::end(&path)),
    })
    .await;
    let mut reader = match opened {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return super::token::refuse(StatusCode::BAD_REQUEST, &e.to_string()),
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
    sse_response(rx)
}

/// The events a connection's task sends, as the response (with a
/// keep-alive comment every 15 s).
fn sse_response(rx: tokio::sync::mpsc::Receiver<Event>) -> Response {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
