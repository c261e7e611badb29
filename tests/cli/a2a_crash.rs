//! An A2A task's exactly-once across a crash of `swarm a2a` (docs/a2a.md;
//! why the task store is a record per key and not a `protocol::ledger`:
//! the ledger's module doc). The record is written before the handoff is
//! queued (the intent) and again after, naming it; a message sent again
//! finds the handoff by the task's id in its subject. The two states a
//! kill between those writes leaves are made here from a real task, and
//! the same message sent again carries each on once.

use serde_json::{json, Value};

use crate::a2a::{project, sent_by_client, token_file, Server};

#[test]
fn a_task_killed_between_its_intent_and_its_record_is_carried_on_once() {
    let p = project();
    let s = Server::start(&p);
    let token = std::fs::read_to_string(token_file(&p)).unwrap();
    let bearer = format!("Bearer {}", token.trim());
    let auth = [("Authorization", bearer.as_str())];
    let send = |message_id: &str| -> String {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params":
            {"message": {"messageId": message_id, "role": "ROLE_USER",
                         "parts": [{"text": "Fix the build."}]},
             "configuration": {"returnImmediately": true}}});
        let (status, out) = s.raw("/a2a/dev", &auth, &body.to_string());
        assert_eq!(status, 200, "{out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        let id = v["result"]["task"]["id"].as_str();
        id.unwrap_or_else(|| panic!("{out}")).to_string()
    };
    let record = |id: &str| p.path(&format!(".swarmforge/a2a/tasks/{id}.json"));
    let handoff = |id: &str| -> Value {
        let r: Value = serde_json::from_slice(&std::fs::read(record(id)).unwrap()).unwrap();
        r["handoff"].clone()
    };
    // What a kill after the intent leaves: the record without its handoff.
    let forget = |id: &str| {
        let mut r: Value = serde_json::from_slice(&std::fs::read(record(id)).unwrap()).unwrap();
        r["handoff"] = Value::Null;
        std::fs::write(record(id), serde_json::to_vec_pretty(&r).unwrap()).unwrap();
    };

    // Killed after the handoff was queued, before the record named it.
    let one = send("m-1");
    let queued = sent_by_client(&p);
    assert_eq!(queued.len(), 1);
    let first = handoff(&one);
    forget(&one);
    assert_eq!(send("m-1"), one, "the same task");
    assert_eq!(sent_by_client(&p), queued, "no second handoff");
    assert_eq!(handoff(&one), first, "the record names the first handoff");

    // Killed after the intent, before the handoff was queued.
    let two = send("m-2");
    let second = handoff(&two);
    let name = sent_by_client(&p)
        .into_iter()
        .find(|n| !queued.contains(n))
        .unwrap();
    std::fs::remove_file(p.hq("client", "outbox").join(&name)).unwrap();
    forget(&two);
    assert_eq!(send("m-2"), two, "the same task");
    let now = sent_by_client(&p);
    assert_eq!(now.len(), 2, "one handoff for it: {now:?}");
    assert!(handoff(&two).is_string(), "the record names it");
    assert_ne!(handoff(&two), second, "queued now, not the one removed");
}
