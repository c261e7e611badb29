//! The tool list against the one the hand-written schemas sent, and the
//! refusals of malformed arguments against the hand-written reader's.

use super::*;
use crate::doors::mcp::args::MAX_ARG_BYTES;

/// The derived `tools/list` is the one the hand-written schemas sent
/// (captured from them before they went): names, descriptions, types,
/// bounds, required arguments, all of it. And it stays small.
#[test]
fn the_derived_tool_list_is_the_hand_written_one() {
    let want: Value =
        serde_json::from_str(include_str!("../../../../../../tests/mcp/tools-list.json")).unwrap();
    let got = serde_json::to_value(definitions()).unwrap();
    assert_eq!(got, want, "{}", serde_json::to_string_pretty(&got).unwrap());
    let size = got.to_string().len();
    assert!(size < 6 * 1024, "tools/list is {size} bytes");
}

/// A project (no roles) and an agent in it: enough for the calls that
/// look for it before they read all their arguments.
fn agent_in_a_project() -> (tempfile::TempDir, Agent) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".swarmforge")).unwrap();
    std::fs::write(dir.path().join(".swarmforge/roles.tsv"), "").unwrap();
    let agent = Agent {
        role: "coder".into(),
        cwd: dir.path().to_path_buf(),
    };
    (dir, agent)
}

/// Each call of `cases` (tool, arguments, the text) is refused before
/// anything is read, as a usage error with that text.
fn refused_with_their_texts(cases: &[(&str, Value, &str)]) {
    let (_dir, agent) = agent_in_a_project();
    let mut wrong = Vec::new();
    for (tool, args, want) in cases {
        let got = call(&agent, tool, args.as_object()).unwrap_err();
        if got.text != *want || got.json["token"] != "USAGE" || got.json["message"] != *want {
            wrong.push(format!("{tool} {args}: {}", got.text));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// What the client may send to `send` without checking the schema is
/// refused before anything is read, with the texts the hand-written
/// reader gave (every case here passes on it too).
#[test]
fn malformed_send_arguments_are_refused_with_the_tools_texts() {
    let mut crowd = json!({"type": "note", "to": "r"});
    for i in 0..63 {
        crowd[format!("h{i}")] = json!("v");
    }
    refused_with_their_texts(&[
        ("send", crowd, "send: at most 64 arguments."),
        (
            "send",
            json!({"type": "note", "to": "r", "from: qa": "y"}),
            "send: 'from: qa' is not a header name.",
        ),
        ("send", json!({"to": "r"}), "send: 'type' is required."),
        ("send", json!({"type": "note"}), "send: 'to' is required."),
        (
            "send",
            json!({"type": "no\nte", "to": "r"}),
            "send: 'type' must be one line; got a line break.",
        ),
        (
            "send",
            json!({"type": "note", "to": "r", "priority": 50}),
            "send: 'priority' must be a string.",
        ),
        (
            "send",
            json!({"type": "note", "to": "r", "message": 5}),
            "send: header 'message' must be a string.",
        ),
        (
            "send",
            json!({"type": "note", "to": "r", "message": "a\nb"}),
            "send: 'message' must be one line; got a line break.",
        ),
    ]);
}

/// The same for `next` and `done`.
#[test]
fn malformed_next_and_done_arguments_are_refused_with_the_tools_texts() {
    let long = "x".repeat(MAX_ARG_BYTES + 1);
    refused_with_their_texts(&[
        (
            "next",
            json!({"wait_seconds": 51}),
            "next: 'wait_seconds' must be a whole number from 0 to 50.",
        ),
        (
            "next",
            json!({"wait_seconds": "5"}),
            "next: 'wait_seconds' must be a whole number from 0 to 50.",
        ),
        (
            "next",
            json!({"wait_seconds": -1}),
            "next: 'wait_seconds' must be a whole number from 0 to 50.",
        ),
        (
            "next",
            json!({"wait": 5}),
            "next: unknown argument 'wait'; expected wait_seconds.",
        ),
        (
            "done",
            json!({"failed": 5}),
            "done: 'failed' must be a string.",
        ),
        (
            "done",
            json!({"failed": "a\nb"}),
            "done: 'failed' must be one line; got a line break.",
        ),
        (
            "done",
            json!({"failed": long}),
            &format!(
                "done: 'failed' must be at most {MAX_ARG_BYTES} bytes; got {}.",
                MAX_ARG_BYTES + 1
            ),
        ),
    ]);
}

/// The same for `reply`, `ask` and `answer`.
#[test]
fn malformed_reply_ask_and_answer_arguments_are_refused_with_the_tools_texts() {
    refused_with_their_texts(&[
        ("reply", json!({}), "reply: 'body' is required."),
        ("reply", json!({"body": null}), "reply: 'body' is required."),
        ("ask", json!({"to": "r"}), "ask: 'question' is required."),
        (
            "ask",
            json!({"to": "r", "question": "q", "allow_multiple": "yes"}),
            "ask: 'allow_multiple' must be true or false.",
        ),
        (
            "ask",
            json!({"to": "r", "question": "q", "options": "a"}),
            "ask: 'options' must be a list of strings.",
        ),
        (
            "ask",
            json!({"to": "r", "question": "q", "options": ["a\nb"]}),
            "ask: 'options' must be one line; got a line break.",
        ),
        (
            "ask",
            json!({"to": "r", "question": "q", "options": vec!["a"; 41]}),
            "ask: 'options' must be a list of strings.",
        ),
        (
            "answer",
            json!({"id": "x", "choices": [0.5]}),
            "answer: 'choices' must be option numbers.",
        ),
        (
            "answer",
            json!({"id": "x", "choices": [1000]}),
            "answer: 'choices' must be option numbers.",
        ),
        (
            "answer",
            json!({"id": "x", "choices": "1"}),
            "answer: 'choices' must be a list of option numbers.",
        ),
        (
            "answer",
            json!({"id": "x"}),
            "answer: give choices and/or text.",
        ),
    ]);
}

/// The same for `read`, `search`, `status`, the reservation tools, and a
/// tool that does not exist.
#[test]
fn malformed_reading_and_reservation_calls_are_refused_with_the_tools_texts() {
    refused_with_their_texts(&[
        (
            "read",
            json!({"last": 101}),
            "read: 'last' must be a whole number from 0 to 100.",
        ),
        ("read", json!({"type": 1}), "read: 'type' must be a string."),
        (
            "search",
            json!({"query": "q", "limit": 51}),
            "search: 'limit' must be a whole number from 0 to 50.",
        ),
        ("search", json!({}), "search: 'query' is required."),
        (
            "status",
            json!({"x": 1}),
            "status: unknown argument 'x'; expected .",
        ),
        (
            "reserve",
            json!({"globs": [1]}),
            "reserve: 'globs' must be a list of one-line strings.",
        ),
        (
            "release",
            json!({"globs": "src/**"}),
            "release: 'globs' must be a list of strings.",
        ),
        (
            "reservations",
            json!({"all": true}),
            "reservations: unknown argument 'all'; expected .",
        ),
        ("nope", json!({}), "unknown tool 'nope'."),
    ]);
}

/// Every argument is checked before a file is read: a call wrong in
/// its arguments is refused for them, whatever the queue holds (the
/// hand-written reader looked for the item in process, or the message
/// an id names, first).
#[test]
fn arguments_are_checked_before_any_file_is_read() {
    let agent = Agent {
        role: "coder".into(),
        cwd: PathBuf::from("/nonexistent/swarm"),
    };
    let cases = [
        (
            "reply",
            json!({"body": "b", "to": "a\rb"}),
            "reply: 'to' must be one line; got a line break.",
        ),
        (
            "react",
            json!({"id": "x"}),
            "react: 'reaction' is required.",
        ),
        ("read", json!({"type": 1}), "read: 'type' must be a string."),
        (
            "reserve",
            json!({"globs": [1]}),
            "reserve: 'globs' must be a list of one-line strings.",
        ),
        // A header name with a line break is echoed escaped (it was echoed
        // raw).
        (
            "send",
            json!({"type": "note", "to": "r", "from: qa\nx": "y"}),
            "send: 'from: qa\\nx' must be one line; got a line break.",
        ),
        // The schema always said so; the reader let it through to the
        // reservation's own "name 1 to 64 globs".
        ("reserve", json!({}), "reserve: 'globs' is required."),
    ];
    for (tool, args, want) in cases {
        let got = call(&agent, tool, args.as_object()).unwrap_err();
        assert_eq!(got.text, want, "{tool} {args}");
    }
}
