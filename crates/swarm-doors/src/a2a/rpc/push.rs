//! Push notification configs (A2A v1.0, "Push notifications"): their
//! A2A shape checked field by field (an https or loopback URL, bounded,
//! at most [`MAX_PUSH_CONFIGS`] per task) and kept with the task in the
//! store, which the tracker reads to deliver updates.

use serde_json::{json, Map, Value};

use super::super::store::PushConfig;
use super::{
    id_field, str_field, task_of, Ctx, Outcome, RpcError, MAX_PUSH_CONFIGS, MAX_URL_BYTES,
};

/// A push config from its A2A shape (`TaskPushNotificationConfig`).
pub(super) fn push_config(o: &Map<String, Value>) -> Result<PushConfig, RpcError> {
    let Some(url) = str_field(o, "url")? else {
        return Err(RpcError::params("url is required"));
    };
    let parsed_ok = (url.starts_with("http://") || url.starts_with("https://"))
        && url.len() <= MAX_URL_BYTES
        && !url.chars().any(|c| c.is_control() || c == ' ');
    if !parsed_ok {
        return Err(RpcError::params(
            "url must be an http:// or https:// URL of at most 2048 characters",
        ));
    }
    let authority = url
        .split("://")
        .nth(1)
        .unwrap_or("")
        .split('/')
        .next()
        .unwrap_or("");
    if authority.contains('@') {
        return Err(RpcError::params(
            "url must not carry credentials; give them in authentication",
        ));
    }
    let line = |k: &str, v: Option<&str>| -> Result<Option<String>, RpcError> {
        match v {
            Some(s) if s.len() > 4096 || s.chars().any(char::is_control) => Err(RpcError::params(
                format!("{k} must be one line of at most 4096 bytes"),
            )),
            other => Ok(other.map(str::to_string)),
        }
    };
    let (scheme, credentials) = match o.get("authentication") {
        Some(Value::Object(a)) => (
            line("authentication.scheme", str_field(a, "scheme")?)?,
            line("authentication.credentials", str_field(a, "credentials")?)?,
        ),
        None | Some(Value::Null) => (None, None),
        Some(_) => return Err(RpcError::params("authentication must be an object")),
    };
    Ok(PushConfig {
        id: id_field(o, "id")?.unwrap_or("default").to_string(),
        task_id: id_field(o, "taskId")?.unwrap_or("").to_string(),
        url: url.to_string(),
        token: line("token", str_field(o, "token")?)?,
        scheme,
        credentials,
    })
}

pub(super) fn push_from_send(params: &Map<String, Value>) -> Result<Option<PushConfig>, RpcError> {
    match params
        .get("configuration")
        .and_then(|c| c.get("taskPushNotificationConfig"))
    {
        Some(Value::Object(o)) => push_config(o).map(Some),
        None | Some(Value::Null) => Ok(None),
        Some(_) => Err(RpcError::params(
            "configuration.taskPushNotificationConfig must be an object",
        )),
    }
}

/// The config as A2A shows it (credentials are not echoed).
pub(super) fn push_json(c: &PushConfig) -> Value {
    let mut v = json!({"id": c.id, "taskId": c.task_id, "url": c.url});
    if let Some(t) = &c.token {
        v["token"] = json!(t);
    }
    if let Some(s) = &c.scheme {
        v["authentication"] = json!({"scheme": s});
    }
    v
}

pub(super) fn save_push(ctx: &Ctx, c: PushConfig) -> Outcome {
    let existing = ctx.store.push_configs(&c.task_id)?;
    if existing.len() >= MAX_PUSH_CONFIGS && !existing.iter().any(|e| e.id == c.id) {
        return Err(RpcError::params(format!(
            "task '{}' has {MAX_PUSH_CONFIGS} push configs already; delete one first",
            c.task_id
        )));
    }
    ctx.store.save_push(&c)?;
    // Events already logged are due to the new receiver now.
    ctx.tracker.wake_pusher();
    Ok(push_json(&c))
}

pub fn create_push(ctx: &Ctx, params: &Map<String, Value>) -> Outcome {
    let c = push_config(params)?;
    task_of(
        ctx,
        Some(&c.task_id)
            .filter(|t| !t.is_empty())
            .map(|s| s.as_str()),
    )?;
    save_push(ctx, c)
}

pub fn get_push(ctx: &Ctx, params: &Map<String, Value>) -> Outcome {
    let rec = task_of(ctx, id_field(params, "taskId")?)?;
    let id = id_field(params, "id")?.unwrap_or("default");
    ctx.store
        .push_configs(&rec.id)?
        .iter()
        .find(|c| c.id == id)
        .map(push_json)
        .ok_or_else(|| RpcError::params(format!("task '{}' has no push config '{id}'", rec.id)))
}

pub fn list_push(ctx: &Ctx, params: &Map<String, Value>) -> Outcome {
    let rec = task_of(ctx, id_field(params, "taskId")?)?;
    let configs: Vec<Value> = ctx
        .store
        .push_configs(&rec.id)?
        .iter()
        .map(push_json)
        .collect();
    Ok(json!({"configs": configs, "nextPageToken": ""}))
}

pub fn delete_push(ctx: &Ctx, params: &Map<String, Value>) -> Outcome {
    let rec = task_of(ctx, id_field(params, "taskId")?)?;
    let id = id_field(params, "id")?.unwrap_or("default");
    if !ctx.store.delete_push(&rec.id, id)? {
        return Err(RpcError::params(format!(
            "task '{}' has no push config '{id}'",
            rec.id
        )));
    }
    Ok(json!({}))
}
