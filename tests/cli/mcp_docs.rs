//! docs/mcp.md says what `swarm mcp` offers: the tools its table lists, how
//! many it says there are and what their `tools/list` costs are those of
//! tests/mcp/tools-list.json, the snapshot the server's own unit test holds
//! the derived tool list to (crates/swarm-doors/src/doors/mcp/tools/tests.rs). So a tool added
//! or a description grown fails here until the page says so too (it said
//! nine tools and 3.3 KB while the server offered thirteen and 4.7 KB).
//!
//! Reads two files, starts nothing: cheap enough to run on every change.

use serde_json::{json, Value};

const DOC: &str = include_str!("../../docs/mcp.md");
const SNAPSHOT: &str = include_str!("../mcp/tools-list.json");

/// The `{"jsonrpc":"2.0","id":N,"result":` before the result and the `}`
/// after it, for the request id 2 the page's measuring command uses.
const ENVELOPE: usize = r#"{"jsonrpc":"2.0","id":2,"result":}"#.len();

fn tools() -> Vec<Value> {
    serde_json::from_str::<Value>(SNAPSHOT)
        .expect("tests/mcp/tools-list.json is JSON")
        .as_array()
        .expect("tests/mcp/tools-list.json is the tools array")
        .clone()
}

/// The tool names in the first table of "## `swarm mcp", in order.
fn documented_names() -> Vec<String> {
    let section = DOC
        .split("## `swarm mcp")
        .nth(1)
        .expect("docs/mcp.md has a \"## `swarm mcp\" section");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| tool |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cell = l.split('|').nth(1).unwrap_or_default().trim();
            cell.trim_matches('`').to_string()
        })
        .collect()
}

fn in_words(n: usize) -> &'static str {
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen \
     fifteen sixteen seventeen eighteen nineteen twenty"
        .split(' ')
        .nth(n)
        .unwrap_or("more than twenty")
}

/// The number right after `marker` in the page (digits only), if any.
fn number_after(marker: &str) -> Option<usize> {
    let rest = DOC.split(marker).nth(1)?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

#[test]
fn the_tool_table_lists_the_servers_tools_in_order() {
    let want: Vec<String> = tools()
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .expect("every tool has a name")
                .to_string()
        })
        .collect();
    assert_eq!(
        documented_names(),
        want,
        "docs/mcp.md's tool table against tests/mcp/tools-list.json: give every tool a row, in the server's order"
    );
}

#[test]
fn the_page_says_how_many_tools_there_are() {
    let n = tools().len();
    let said = format!("as {} small tools", in_words(n));
    assert!(
        DOC.contains(&said),
        "docs/mcp.md should say the server gives the handoff files {said:?} (tests/mcp/tools-list.json has {n})"
    );
}

#[test]
fn the_page_says_what_tools_list_costs() {
    // Compact JSON, as the server sends it; the key order does not change
    // the length.
    let result = serde_json::to_string(&json!({ "tools": tools() }))
        .unwrap()
        .len();
    let envelope = result + ENVELOPE;
    assert_eq!(
        (
            number_after("response, JSON-RPC envelope included, is **"),
            number_after("(the result object ")
        ),
        (Some(envelope), Some(result)),
        "docs/mcp.md's \"Context cost\" should give the response as **{envelope} bytes** and the result object as {result}"
    );
    assert!(
        envelope < 6 * 1024,
        "tools/list is {envelope} bytes, over the 6 KB bound docs/mcp.md promises"
    );
}
