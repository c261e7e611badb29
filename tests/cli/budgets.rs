//! Budgets (docs/cost.md, "Budgets"): a role at its budget is parked (no
//! wake-up, no new turn, nothing taken), an attention item, a
//! `budget_reached` journal and notify event say so, status, audit --check
//! and `swarm budget` show it, and a person's `swarm budget raise` lets it
//! go on (an agent's is refused).

use crate::api::{names, project, run_api, FakeServer, KEY};
use crate::spending::chat_with_usage;
use crate::support::{wait_until, DEADLINE};

/// The `budget` attention item of `swarm status --json`'s output `st`.
pub(crate) fn budget_item(st: &serde_json::Value) -> serde_json::Value {
    st["attention"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "budget")
        .cloned()
        .unwrap_or_else(|| panic!("no budget attention item: {st}"))
}

/// Whether `st` (`swarm status --json`) has a `budget` attention item.
pub(crate) fn has_budget_item(st: &serde_json::Value) -> bool {
    st["attention"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["kind"] == "budget")
}

fn has_event(p: &crate::support::Project, kind: &str, role: &str) -> bool {
    p.events()
        .iter()
        .any(|e| e["kind"] == kind && e["recipient"] == role)
}

#[test]
fn a_role_at_its_budget_is_parked_until_a_person_raises_it() {
    let server = FakeServer::start(vec![
        chat_with_usage("on it", 1500, 0, 20, None),
        chat_with_usage("second", 10, 0, 2, None),
    ]);
    let root_probe = tempfile::tempdir().unwrap();
    let wakes = root_probe.path().join("wakes.txt");
    let notes = root_probe.path().join("notify.txt");
    let extra = format!(
        "wake: {{method: command, command: \"echo $SWARMFORGE_ROLE >> {}\"}}\nnotify: {{command: \"echo $SWARMFORGE_EVENT $SWARMFORGE_ROLE >> {}\"}}\n",
        wakes.display(),
        notes.display()
    );
    let p = project(
        &server,
        &[("a", false), ("b", true)],
        &extra,
        "    budget: {tokens: 1000, per: day}\n",
    );
    let _d = p.spawn_daemon(&[]);
    p.send_as("a", "type: note\nto: b\npriority: 10\nmessage: first\n")
        .ok();
    wait_until(DEADLINE, "b woken for the first note", || {
        std::fs::read_to_string(&wakes).is_ok_and(|w| w.contains('b'))
    });
    run_api(&p, "b");
    assert_eq!(server.seen().len(), 1);

    // Over the limit (1520 of 1000 tokens): parked, said once in the
    // journal and to notify.command.
    wait_until(DEADLINE, "budget_reached for b", || {
        has_event(&p, "budget_reached", "b")
    });
    wait_until(DEADLINE, "notify.command told of it", || {
        std::fs::read_to_string(&notes).is_ok_and(|n| n.contains("budget_reached b"))
    });
    let item = budget_item(&p.swarm(&["status", "--json"]).ok().json());
    assert_eq!(item["role"], "b");
    assert!(
        item["handle"]
            .as_str()
            .unwrap()
            .starts_with("swarm budget raise b"),
        "{item}"
    );
    let text = p.swarm(&["status"]).ok().stdout.clone();
    assert!(
        text.contains("PARKED b: budget of b reached: 1520 of 1000 tokens"),
        "{text}"
    );
    let check = p.swarm(&["audit", "--check"]);
    check.stdout_has("PARKED b: budget of b reached");
    let cj = p.swarm(&["audit", "--check", "--json"]).json();
    assert_eq!(cj["parked"][0]["role"], "b", "{cj}");
    let b = p.swarm(&["budget", "--json"]).ok().json();
    assert_eq!(b["budgets"][0]["budget_of"], "b");
    assert!(b["budgets"][0]["reached"].is_object(), "{b}");
    p.swarm(&["budget"]).ok().stdout_has("PARKED");

    // New mail while parked: delivered, no wake-up (the journal says why),
    // no call, nothing taken.
    p.send_as("a", "type: note\nto: b\npriority: 11\nmessage: second\n")
        .ok();
    wait_until(DEADLINE, "the wake-up held for b", || {
        p.events().iter().any(|e| {
            e["kind"] == "wake_held"
                && e["recipient"] == "b"
                && e["reason"].as_str().is_some_and(|r| r.contains("parked"))
        })
    });
    run_api(&p, "b").stdout_has("parked, no call");
    assert_eq!(server.seen().len(), 1, "no call while parked");
    assert_eq!(names(&p, "b", "inbox/new").len(), 1, "the item still waits");
    assert!(names(&p, "b", "inbox/in_process").is_empty());

    // An agent may not raise its own budget.
    let r = p
        .cmd("swarm")
        .role("b")
        .env("FAKE_API_KEY", KEY)
        .args(["budget", "raise", "b", "--tokens", "1000"])
        .run();
    assert_eq!(r.code, 2, "{r:?}");
    r.stderr_has("PERSON_ONLY");
    assert!(p.swarm(&["budget", "--json"]).json()["budgets"][0]["reached"].is_object());

    // A person's raise: released, woken for the waiting mail, and the next
    // run takes it.
    p.swarm(&["budget", "raise", "b", "--tokens", "1000"])
        .ok()
        .stdout_has("raised the budget of b by 1000 tokens");
    wait_until(DEADLINE, "budget_released for b", || {
        has_event(&p, "budget_released", "b")
    });
    wait_until(DEADLINE, "b woken again for its waiting mail", || {
        p.events()
            .iter()
            .any(|e| e["kind"] == "renotified" && e["recipient"] == "b")
    });
    assert!(has_event(&p, "budget_raised", "b"));
    run_api(&p, "b");
    assert_eq!(server.seen().len(), 2);
    assert!(names(&p, "b", "inbox/new").is_empty());
    let st = p.swarm(&["status", "--json"]).ok().json();
    assert!(!has_budget_item(&st), "{st}");
}

#[test]
fn the_swarms_budget_parks_every_role_and_raises_are_checked() {
    let server = FakeServer::start(vec![chat_with_usage("ok", 100, 0, 0, Some(0.5))]);
    let p = project(
        &server,
        &[("a", false), ("b", true)],
        "budget: {cost: 0.25, per: swarm}\n",
        "",
    );
    p.send_as("a", "type: note\nto: b\npriority: 10\nmessage: hi\n")
        .ok();
    p.deliver_once().ok();
    run_api(&p, "b");
    let st = p.swarm(&["status", "--json"]).ok().json();
    let parked: Vec<_> = st["attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "budget")
        .map(|a| a["role"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(parked, ["a", "b"], "every agent role: {st}");
    p.swarm(&["status"])
        .ok()
        .stdout_has("the swarm's budget reached: $0.5000 of $0.2500");
    // Raises: of a role without a budget, of nothing, of a bad amount.
    let r = p.swarm(&["budget", "raise", "a", "--tokens", "5"]);
    assert_eq!(r.code, 1);
    r.stderr_has("role 'a' has no budget");
    let r = p.swarm(&["budget", "raise", "all"]);
    assert_eq!(r.code, 1);
    r.stderr_has("--tokens N and/or --cost X");
    let r = p.swarm(&["budget", "raise", "all", "--cost", "NaN"]);
    assert_eq!(r.code, 1);
    p.swarm(&["budget", "raise", "all", "--cost", "1"]).ok();
    let st = p.swarm(&["status", "--json"]).ok().json();
    assert!(!st["attention"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["kind"] == "budget"));
    // A raises file with hostile lines: skipped and counted.
    let f = p.path(".swarmforge/telemetry/budget-raises.jsonl");
    let mut text = std::fs::read_to_string(&f).unwrap();
    text.push_str("{\"target\":\"all\",\"period\":\"swarm\",\"cost_usd\":-9}\nnope\n");
    std::fs::write(&f, text).unwrap();
    let b = p.swarm(&["budget", "--json"]).ok().json();
    assert_eq!(b["skipped_lines"], 2, "{b}");
    assert!(b["budgets"][0]["reached"].is_null());
}
