//! Tokens and cost (docs/cost.md): an `agent: api` role journals the usage
//! its model server reports, `swarm cost` sums it to the token by role,
//! item, thread and day, prices apply where the server gave no cost,
//! `swarm status` and `swarm audit` show it per role, and unreadable
//! journal lines are skipped and counted.

use std::fs;
use std::io::Write;

use crate::api::{names, project, run_api, Answer, FakeServer};
use crate::support::file_header;

/// A chat answer reporting its usage (OpenAI's shape).
pub(crate) fn chat_with_usage(
    content: &str,
    prompt: u64,
    cached: u64,
    completion: u64,
    cost: Option<f64>,
) -> Answer {
    let mut usage = serde_json::json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    });
    if let Some(c) = cost {
        usage["cost"] = c.into();
    }
    Answer::Ok(
        serde_json::json!({
            "id": "x", "object": "chat.completion", "model": "fake-model-2026-01",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage,
        })
        .to_string(),
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn swarm_cost_equals_the_usage_the_server_reported_to_the_token() {
    let server = FakeServer::start(vec![
        chat_with_usage("on it", 1200, 200, 34, None),
        chat_with_usage("done", 800, 0, 21, Some(0.0123)),
    ]);
    let p = project(
        &server,
        &[("a", false), ("b", true)],
        "prices:\n  fake-model: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}\n",
        "",
    );
    let id_of = |draft: &str| {
        let q = p.send_as("a", draft).queued();
        file_header(&q, "id").unwrap()
    };
    let n1 = id_of("type: note\nto: b\npriority: 10\nmessage: first\n");
    let n2 = id_of("type: note\nto: b\npriority: 11\nmessage: second\n");
    p.deliver_once().ok();
    run_api(&p, "b");
    assert_eq!(server.seen().len(), 2);

    let r = p.swarm(&["cost", "--json"]).ok().json();
    let t = &r["total"];
    assert_eq!(t["turns"], 2);
    assert_eq!(t["input_tokens"], 1000 + 800, "{r}");
    assert_eq!(t["cache_read_tokens"], 200);
    assert_eq!(t["output_tokens"], 34 + 21);
    assert_eq!(t["total_tokens"], 1200 + 34 + 800 + 21);
    assert_eq!(t["unpriced_turns"], 0);
    // The first answer priced by the longest matching `prices:` entry, the
    // second at the cost its server reported.
    let priced = 1000.0 * 3.0 / 1e6 + 200.0 * 0.3 / 1e6 + 34.0 * 15.0 / 1e6;
    assert!(
        close(t["cost_usd"].as_f64().unwrap(), priced + 0.0123),
        "{r}"
    );
    assert_eq!(r["rows"][0]["key"], "b");
    assert!(r["schema_version"].is_number(), "{r}");

    let by_item = p.swarm(&["cost", "--by", "item", "--json"]).ok().json();
    let mut keys: Vec<String> = by_item["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["key"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    let mut want = vec![n1.clone(), n2.clone()];
    want.sort();
    assert_eq!(keys, want, "one row per item b worked on");
    let by_thread = p.swarm(&["cost", "--by", "thread", "--json"]).ok().json();
    assert_eq!(by_thread["rows"].as_array().unwrap().len(), 2);
    let by_day = p.swarm(&["cost", "--by", "day", "--json"]).ok().json();
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let day_key = by_day["rows"][0]["key"].as_str().unwrap().to_string();
    assert!(
        day_key == today || by_day["rows"].as_array().unwrap().len() == 2,
        "{by_day}"
    );
    let later = p
        .swarm(&["cost", "--since", "2999-01-01", "--json"])
        .ok()
        .json();
    assert_eq!(later["total"]["turns"], 0);
    let bad = p.swarm(&["cost", "--since", "yesterday"]);
    assert_eq!(bad.code, 1);
    bad.stderr_has("--since: 'yesterday' is neither");

    let table = p.swarm(&["cost"]).ok().stdout.clone();
    assert!(table.contains("TOTAL") && table.contains("\nb "), "{table}");

    // status and audit, per role.
    let st = p.swarm(&["status", "--json"]).ok().json();
    let b = st["spend"]["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "b")
        .cloned()
        .expect("b in status spend");
    assert_eq!(b["total_tokens"], 2055);
    p.swarm(&["status"]).ok().stdout_has("TOKENS AND COST");
    let audit = p.swarm(&["audit"]).ok().stdout.clone();
    assert!(
        audit.contains("TOKENS AND COST") && audit.contains("2055 tokens"),
        "{audit}"
    );
    let aj = p.swarm(&["audit", "--json"]).ok().json();
    assert_eq!(aj["spend"]["roles"][0]["total_tokens"], 2055, "{aj}");

    // Untrusted lines: not JSON, invalid UTF-8, overlong; skipped, counted,
    // and the totals are unchanged.
    let journal = p.path(".swarmforge/telemetry/usage.jsonl");
    let mut f = fs::OpenOptions::new().append(true).open(&journal).unwrap();
    f.write_all(b"not json\n\xff\xfe{\"role\":\"b\"}\n")
        .unwrap();
    f.write_all(&vec![b'x'; 100_000]).unwrap();
    f.write_all(b"\n{\"time\":\"x\",\"role\":\"b\"}\n").unwrap();
    drop(f);
    let r = p.swarm(&["cost", "--json"]).ok().json();
    assert_eq!(r["skipped_lines"], 4, "{r}");
    assert_eq!(r["total"]["total_tokens"], 2055);
    p.swarm(&["cost"])
        .ok()
        .stdout_has("skipped 4 unreadable lines");
    assert!(names(&p, "b", "inbox/new").is_empty());
}

#[test]
fn a_turn_without_a_price_or_a_reported_cost_is_counted_as_unpriced() {
    let server = FakeServer::start(vec![chat_with_usage("ok", 10, 0, 5, None)]);
    let p = project(&server, &[("a", false), ("b", true)], "", "");
    p.send_as("a", "type: note\nto: b\npriority: 10\nmessage: hi\n")
        .ok();
    p.deliver_once().ok();
    run_api(&p, "b");
    let r = p.swarm(&["cost", "--json"]).ok().json();
    assert_eq!(r["total"]["unpriced_turns"], 1, "{r}");
    assert_eq!(r["total"]["cost_usd"], 0.0);
    p.swarm(&["cost"]).ok().stdout_has("unpriced");
    // A bad price is refused when the config is read, naming the key.
    p.config("prices:\n  m: {input: -1}\n");
    let bad = p.swarm(&["cost"]);
    assert_eq!(bad.code, 1);
    bad.stderr_has("prices.m.input must be");
}
