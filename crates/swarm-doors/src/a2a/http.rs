//! The HTTP side: routes, the bearer token on every request, bounded
//! bodies, blocking sends and the SSE streams (A2A v1.0 JSON-RPC binding).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};

use crate::protocol::config::Config;

use super::card::{self, Offered};
use super::rpc::{self, code, Ctx, RpcError};
use super::store::Record;
use super::task::{self, View};
use super::App;

/// The largest request body read (a message's text is at most 16 KiB).
pub const MAX_BODY: usize = 64 * 1024;
/// How long a blocking `SendMessage` waits for the task to stop or ask.
const BLOCK_WAIT: Duration = Duration::from_secs(25);
/// How often a stream or a blocking send looks without a tick.
const LOOK: Duration = Duration::from_secs(2);

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/.well-known/agent-card.json", get(swarm_card))
        .route("/a2a/{role}/.well-known/agent-card.json", get(role_card))
        .route("/a2a/{role}", post(rpc_endpoint))
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Every request needs `Authorization: Bearer <token>`.
async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let ok = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| crate::text::same_secret(t.trim(), &app.token));
    if !ok {
        let body = json!({"error": "missing or wrong bearer token: send Authorization: Bearer <the token in .swarmforge/a2a/token>"});
        let mut r = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, "Bearer".parse().unwrap());
        return r;
    }
    if let Some(s) = req.extensions().get::<crate::serve::listen::Shown>() {
        s.set();
    }
    let mut res = next.run(req).await;
    res.headers_mut()
        .insert(header::CACHE_CONTROL, "no-store".parse().unwrap());
    res
}

/// `http://host:port` as the client reached us (a Host header that is a
/// plain host and port), else the address bound.
fn base(app: &App, headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.len() <= 255
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        });
    match host {
        Some(h) => format!("http://{h}"),
        None => format!("http://{}", app.addr),
    }
}

fn config(app: &App) -> Result<(Config, Vec<Offered>), String> {
    let config = Config::load(&app.project.config_file()).map_err(|e| e.to_string())?;
    let offered = card::offered(&app.project, &config).map_err(|e| e.to_string())?;
    Ok((config, offered))
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(f).await.ok()
}

fn not_offered(role: &str, offered: &[Offered]) -> String {
    let names: Vec<&str> = offered.iter().map(|r| r.name.as_str()).collect();
    format!(
        "no A2A agent '{}' here: only roles with a2a: true in swarm.yaml are offered ({})",
        crate::text::escape(&role.chars().take(64).collect::<String>()),
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    )
}

/// The offered roles, read off the async runtime; Err is the answer.
async fn offered_roles(app: &Arc<App>) -> Result<(Config, Vec<Offered>), Response> {
    let a = app.clone();
    match blocking(move || config(&a)).await {
        Some(Ok(x)) => Ok(x),
        Some(Err(e)) => Err(reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": e}),
        )),
        None => Err(StatusCode::INTERNAL_SERVER_ERROR.into_response()),
    }
}

async fn swarm_card(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    match offered_roles(&app).await {
        Ok((_, offered)) => axum::Json(card::swarm_card(
            &base(&app, &headers),
            &app.project,
            &offered,
        ))
        .into_response(),
        Err(r) => r,
    }
}

async fn role_card(
    State(app): State<Arc<App>>,
    Path(role): Path<String>,
    headers: HeaderMap,
) -> Response {
    let offered = match offered_roles(&app).await {
        Ok((_, o)) => o,
        Err(r) => return r,
    };
    match offered.iter().find(|r| r.name == role) {
        Some(r) => axum::Json(card::role_card(&base(&app, &headers), r)).into_response(),
        None => reply(
            StatusCode::NOT_FOUND,
            json!({"error": not_offered(&role, &offered)}),
        ),
    }
}

fn reply(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

async fn rpc_endpoint(
    State(app): State<Arc<App>>,
    Path(role): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return reply(
            StatusCode::PAYLOAD_TOO_LARGE,
            rpc::error(
                &Value::Null,
                &RpcError::new(
                    code::INVALID_REQUEST,
                    format!("the request is larger than {MAX_BODY} bytes"),
                ),
            ),
        );
    };
    let req = match rpc::parse(&bytes) {
        Ok(r) => r,
        Err((id, e)) => return reply(StatusCode::OK, rpc::error(&id, &e)),
    };
    let id = req.id.clone();
    if let Some(v) = headers.get("a2a-version") {
        let v = v.to_str().unwrap_or("");
        if !(v == "1" || v == "1.0" || v.starts_with("1.0.")) {
            return reply(
                StatusCode::OK,
                rpc::error(
                    &id,
                    &RpcError::new(
                        code::VERSION,
                        format!(
                            "A2A-Version '{}' is not supported: this server speaks 1.0",
                            crate::text::escape(&v.chars().take(32).collect::<String>())
                        ),
                    ),
                ),
            );
        }
    }
    let (sender, offered) = match offered_roles(&app).await {
        Ok((c, o)) => (c.a2a.sender.unwrap_or_default(), o),
        Err(r) => return r,
    };
    if !offered.iter().any(|r| r.name == role) {
        return reply(
            StatusCode::NOT_FOUND,
            rpc::error(
                &id,
                &RpcError::new(code::INVALID_REQUEST, not_offered(&role, &offered)),
            ),
        );
    }
    let call = Call {
        app: app.clone(),
        role,
        sender,
    };
    match req.method.as_str() {
        "SendMessage" => call.send(id, req.params).await,
        "SendStreamingMessage" => call.send_streaming(id, req.params).await,
        "SubscribeToTask" => call.subscribe(id, req.params).await,
        _ => {
            let out = call
                .run(move |ctx| rpc::call(ctx, &req.method, &req.params))
                .await;
            reply(
                StatusCode::OK,
                out.map_or_else(|e| rpc::error(&id, &e), |v| rpc::result(&id, v)),
            )
        }
    }
}

/// One request's role and sender.
#[derive(Clone)]
struct Call {
    app: Arc<App>,
    role: String,
    sender: String,
}

impl Call {
    /// Runs `f` with a context, off the async runtime.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Ctx) -> Result<T, RpcError> + Send + 'static,
    ) -> Result<T, RpcError> {
        let c = self.clone();
        let out = blocking(move || {
            let ctx = Ctx {
                project: &c.app.project,
                store: &c.app.store,
                tracker: &c.app.tracker,
                role: &c.role,
                sender: &c.sender,
            };
            f(&ctx)
        })
        .await
        .unwrap_or_else(|| Err(RpcError::new(code::INTERNAL, "the request's worker ended")));
        out
    }

    async fn view(&self, rec: Record) -> Result<(Record, View), RpcError> {
        self.run(move |ctx| {
            let v = ctx.tracker.observe_one(ctx.project, ctx.store, &rec)?;
            Ok((rec, v))
        })
        .await
    }

    async fn send(&self, id: Value, params: Map<String, Value>) -> Response {
        let immediately = params
            .get("configuration")
            .and_then(|c| c.get("returnImmediately"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut ticks = self.app.tracker.subscribe();
        let sent = self.run(move |ctx| rpc::send_message(ctx, &params)).await;
        let (mut rec, mut v) = match sent {
            Ok(x) => x,
            Err(e) => return reply(StatusCode::OK, rpc::error(&id, &e)),
        };
        // The tracker ticks when it logs a change: look then, until the
        // task stops or asks, or the wait is over.
        let until = Instant::now() + BLOCK_WAIT;
        while !immediately && !v.state.is_interrupted() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, ticks.recv()).await.is_err() {
                break;
            }
            match self.view(rec.clone()).await {
                Ok((r, nv)) => (rec, v) = (r, nv),
                Err(e) => return reply(StatusCode::OK, rpc::error(&id, &e)),
            }
        }
        reply(
            StatusCode::OK,
            rpc::result(&id, json!({"task": task::task_json(&rec, &v, None)})),
        )
    }

    async fn send_streaming(&self, id: Value, params: Map<String, Value>) -> Response {
        let sent = self.run(move |ctx| rpc::send_message(ctx, &params)).await;
        match sent {
            Ok((rec, v)) => self.stream(id, rec, v),
            Err(e) => reply(StatusCode::OK, rpc::error(&id, &e)),
        }
    }

    async fn subscribe(&self, id: Value, params: Map<String, Value>) -> Response {
        let got = self
            .run(move |ctx| {
                let task = params
                    .get(super::rpc::RPC_ID)
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match ctx.store.record(task)? {
                    Some(r) if r.role == ctx.role => Ok(r),
                    _ => Err(RpcError::new(
                        code::TASK_NOT_FOUND,
                        format!("no task '{}' here", crate::text::escape(task)),
                    )),
                }
            })
            .await;
        let rec = match got {
            Ok(r) => r,
            Err(e) => return reply(StatusCode::OK, rpc::error(&id, &e)),
        };
        match self.view(rec).await {
            Ok((rec, v)) if v.state.is_terminal() => reply(
                StatusCode::OK,
                rpc::error(
                    &id,
                    &RpcError::new(
                        code::UNSUPPORTED,
                        format!(
                            "task '{}' is {}: nothing more will happen to it",
                            rec.id,
                            v.state.wire()
                        ),
                    ),
                ),
            ),
            Ok((rec, v)) => self.stream(id, rec, v),
            Err(e) => reply(StatusCode::OK, rpc::error(&id, &e)),
        }
    }

    /// The task now, then its logged events as they come, until it stops
    /// or asks (the stream then ends; `SubscribeToTask` goes on).
    fn stream(&self, id: Value, rec: Record, v: View) -> Response {
        let (tx, rx) = tokio::sync::mpsc::channel::<Event>(64);
        let call = self.clone();
        let mut ticks = self.app.tracker.subscribe();
        tokio::spawn(async move {
            let data = |r: Value| Event::default().data(rpc::result(&id, r).to_string());
            let store = call.app.store.clone();
            let task_id = rec.id.clone();
            let mut cursor = {
                let s = store.clone();
                let t = task_id.clone();
                blocking(move || {
                    s.events_after(&t, 0)
                        .ok()
                        .and_then(|e| e.last().map(|l| l.seq))
                })
                .await
                .flatten()
                .unwrap_or(0)
            };
            if tx
                .send(data(json!({"task": task::task_json(&rec, &v, None)})))
                .await
                .is_err()
            {
                return;
            }
            if v.state.is_interrupted() {
                return;
            }
            loop {
                // A tick says the tracker logged something; the log is
                // read every LOOK anyway, in case a tick was missed.
                tokio::select! {
                    _ = tokio::time::timeout(LOOK, ticks.recv()) => {}
                    _ = tx.closed() => return,
                }
                let s = store.clone();
                let t = task_id.clone();
                let Some(Ok(events)) = blocking(move || s.events_after(&t, cursor)).await else {
                    return;
                };
                for e in events {
                    cursor = e.seq;
                    let state = e.event["statusUpdate"]["status"]["state"]
                        .as_str()
                        .or(e.event["task"]["status"]["state"].as_str())
                        .unwrap_or("")
                        .to_string();
                    if tx.send(data(e.event)).await.is_err() {
                        return;
                    }
                    if matches!(
                        state.as_str(),
                        "TASK_STATE_COMPLETED"
                            | "TASK_STATE_FAILED"
                            | "TASK_STATE_CANCELED"
                            | "TASK_STATE_INPUT_REQUIRED"
                    ) {
                        return;
                    }
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
}
