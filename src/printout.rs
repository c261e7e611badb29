//! What `ready-next` and `done-current` print: SwarmForge's tokens (§7.2, §7.3)
//! as text, or one JSON object carrying the same facts.

use serde_json::{json, Map, Value};

use crate::queue::{Done, Item, Ready};

/// §7.2 task printout. The body is printed verbatim (the one parser already
/// refused control characters in it).
pub fn task_text(item: &Item) -> String {
    let mut s = format!(
        "TASK: {}\nFROM: {}\nTYPE: {}\nPRIORITY: {}\n",
        item.path.display(),
        item.header("from").unwrap_or("unknown"),
        item.header("type").unwrap_or("unknown"),
        item.priority()
    );
    if let Some(t) = item.header("task") {
        s.push_str(&format!("TASK_NAME: {t}\n"));
    }
    s.push_str("PAYLOAD:\n");
    s.push_str(&item.msg.body);
    s
}

pub fn ready_text(r: &Ready) -> String {
    match r {
        Ready::NoTask => "NO_TASK\n".to_string(),
        Ready::Task { item, .. } => task_text(item),
        Ready::Batch {
            dir,
            priority,
            items,
            ..
        } => {
            let mut s = format!(
                "BATCH: {}\nCOUNT: {}\nPRIORITY: {priority}\n",
                dir.display(),
                items.len()
            );
            for (i, item) in items.iter().enumerate() {
                s.push_str(&format!("\nBATCH_ITEM: {}\n", i + 1));
                s.push_str(&task_text(item));
            }
            s
        }
    }
}

pub fn done_text(d: &Done) -> String {
    let mut s = String::new();
    for p in &d.completed {
        s.push_str(&format!("COMPLETED: {}\n", p.display()));
    }
    if let Some(b) = &d.completed_batch {
        s.push_str(&format!("COMPLETED_BATCH: {}\n", b.display()));
    }
    if let Ok(next) = &d.next {
        s.push_str(&ready_text(next));
    }
    s
}

pub fn item_json(item: &Item) -> Value {
    let mut headers = Map::new();
    for (n, v) in &item.msg.headers {
        match headers.get_mut(n) {
            Some(Value::Array(a)) => a.push(Value::from(v.as_str())),
            Some(prev) => {
                let p = prev.take();
                *prev = Value::Array(vec![p, Value::from(v.as_str())]);
            }
            None => {
                headers.insert(n.clone(), Value::from(v.as_str()));
            }
        }
    }
    json!({
        "path": item.path,
        "id": item.header("id"),
        "from": item.header("from").unwrap_or("unknown"),
        "type": item.header("type").unwrap_or("unknown"),
        "priority": item.priority(),
        "task_name": item.header("task"),
        "payload": item.msg.body,
        "headers": headers,
    })
}

pub fn ready_json(r: &Ready) -> Value {
    match r {
        Ready::NoTask => json!({"status": "no_task"}),
        Ready::Task { item, resumed } => {
            let mut v = item_json(item);
            v["status"] = json!("task");
            v["resumed"] = json!(resumed);
            v
        }
        Ready::Batch {
            dir,
            priority,
            items,
            resumed,
        } => json!({
            "status": "batch",
            "resumed": resumed,
            "path": dir,
            "count": items.len(),
            "priority": priority,
            "items": items.iter().map(item_json).collect::<Vec<_>>(),
        }),
    }
}

pub fn done_json(d: &Done) -> Value {
    json!({
        "status": "completed",
        "completed": d.completed,
        "completed_batch": d.completed_batch,
        "next": match &d.next {
            Ok(next) => ready_json(next),
            Err(e) => e.to_json(),
        },
    })
}
