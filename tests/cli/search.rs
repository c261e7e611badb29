//! `swarm search` and the MCP `search` tool: ranked full-text search over
//! every message (archived ones too) from an index derived from the files
//! (docs/search.md): rebuilt when deleted or damaged, kept by the daemon,
//! never reading outside the project.

use serde_json::{json, Value};

use crate::support::*;

fn note(p: &Project, from: &str, to: &str, message: &str) -> String {
    let draft = format!("type: note\nto: {to}\npriority: 10\nmessage: {message}\n");
    let path = p.send_as(from, &draft).queued();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    name.split("_to_").next().unwrap()[3..].to_string()
}

fn hits(v: &Value) -> Vec<String> {
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

fn search(p: &Project, args: &[&str]) -> Value {
    let mut a = vec!["search", "--json"];
    a.extend_from_slice(args);
    let r = p.swarm(&a);
    r.ok();
    r.json()
}

/// A small exchange: coder and reviewer talk about the parser and the lexer.
fn exchange() -> (Project, Vec<String>) {
    let p = Project::coder_and_reviewer();
    let ids = vec![
        note(&p, "coder", "reviewer", "the parser is slow"),
        note(
            &p,
            "coder",
            "reviewer",
            "parser parser parser: rewrite the parser",
        ),
        note(&p, "reviewer", "coder", "the lexer drops tabs"),
        note(&p, "reviewer", "coder", "Parser and lexer both reviewed"),
    ];
    (p, ids)
}

#[test]
fn search_ranks_every_message_and_narrows_by_role_type_and_time() {
    let (p, ids) = exchange();
    // Found while still in the outbox, before any daemon ran.
    let v = search(&p, &["parser"]);
    assert_eq!(v["total"], 3, "{v}");
    assert_eq!(
        hits(&v)[0],
        ids[1],
        "the message saying it most ranks first: {v}"
    );
    assert_eq!(v["hits"][0]["state"], "outbox");
    p.deliver_once().ok();
    let v = search(&p, &["PARSER"]);
    assert_eq!(v["hits"][0]["state"], "sent", "{v}");
    // Every word must occur.
    let v = search(&p, &["parser", "lexer"]);
    assert_eq!(hits(&v), [ids[3].clone()], "{v}");
    assert!(v["hits"][0]["snippet"]
        .as_str()
        .unwrap()
        .contains("Parser and lexer"));
    // Role: sent or received by; type; time.
    let v = search(&p, &["lexer", "--role", "reviewer"]);
    assert_eq!(v["total"], 2, "{v}");
    let v = search(&p, &["parser", "--role", "nobody"]);
    assert_eq!(v["total"], 0, "{v}");
    let v = search(&p, &["parser", "--type", "ask"]);
    assert_eq!(v["total"], 0, "{v}");
    let v = search(&p, &["parser", "--type", "note", "--since", "1h"]);
    assert_eq!(v["total"], 3, "{v}");
    let v = search(&p, &["parser", "--since", "2999-01-01T00:00:00Z"]);
    assert_eq!(v["total"], 0, "{v}");
    // --limit shows fewer, the total stays.
    let v = search(&p, &["parser", "--limit", "1"]);
    assert_eq!((hits(&v).len(), v["total"].as_u64()), (1, Some(3)), "{v}");
    // Text: one line per hit, the snippet under it, the count last.
    let r = p.swarm(&["search", "lexer", "drops"]);
    r.ok();
    assert!(r.stdout.starts_with("1. ["), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "{} [reviewer -> coder] note the lexer drops tabs (sent)",
            ids[2]
        )),
        "{}",
        r.stdout
    );
    assert!(r.stdout.ends_with("1 of 1 matching\n"), "{}", r.stdout);
    let r = p.swarm(&["search", "nowhere"]);
    r.ok()
        .stdout_has("no message matches 'nowhere' (4 indexed)");
}

#[test]
fn archived_messages_are_found_where_they_went() {
    let (p, ids) = exchange();
    p.deliver_once().ok();
    search(&p, &["parser"]);
    let tomorrow = (chrono::Utc::now() + chrono::Duration::days(1))
        .format("%Y-%m-%d")
        .to_string();
    p.swarm(&["archive", "--before", &tomorrow]).ok();
    let v = search(&p, &["lexer", "tabs"]);
    assert_eq!(hits(&v), [ids[2].clone()], "{v}");
    assert_eq!(v["hits"][0]["archived"], true, "{v}");
    let path = v["hits"][0]["path"].as_str().unwrap();
    assert!(
        path.contains("/archive/") && std::path::Path::new(path).is_file(),
        "{v}"
    );
}

#[test]
fn bad_queries_are_refused_with_a_reason() {
    let (p, _) = exchange();
    let refused = |args: &[&str], text: &str| {
        let r = p.swarm(args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stdout);
        r.stderr_has(text);
    };
    refused(&["search"], "no query: name the words to look for");
    refused(&["search", "../.."], "nothing to search for in '../..'");
    refused(
        &["search", "x", "--since", "yesterday"],
        "invalid time 'yesterday'",
    );
    refused(
        &["search", "x", "--limit", "0"],
        "--limit must be from 1 to 1000",
    );
    let r = p.swarm(&["search", "--json", ""]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["status"], "error", "{}", r.stdout);
}

#[test]
fn the_index_is_derived_from_the_files_and_rebuilt_from_them() {
    let (p, ids) = exchange();
    p.deliver_once().ok();
    assert_eq!(search(&p, &["parser"])["total"], 3);
    let dir = p.path(".swarmforge/search");
    // Deleted: the next query builds it again.
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(search(&p, &["parser"])["total"], 3);
    // Written by an older build (format 1, no score bounds): the next query
    // rebuilds it in this build's format.
    let manifest = dir.join("manifest.json");
    let read =
        || serde_json::from_str::<Value>(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let mut m = read();
    assert_eq!(m["version"], 2, "{m}");
    m["version"] = json!(1);
    std::fs::write(&manifest, m.to_string()).unwrap();
    assert_eq!(search(&p, &["parser"])["total"], 3);
    assert_eq!(read()["version"], 2);
    // Damaged (a segment cut short): rebuilt, not trusted, not a panic.
    let terms: Vec<_> = walk(&dir)
        .into_iter()
        .filter(|f| f.to_string_lossy().ends_with(".terms"))
        .collect();
    assert!(!terms.is_empty());
    for t in &terms {
        std::fs::write(t, b"short").unwrap();
    }
    // The folders did not change, so only --reindex looks at the index again.
    p.swarm(&["search", "--reindex"])
        .ok()
        .stdout_has("REINDEXED: 4 messages in 1 segment(s)");
    assert_eq!(search(&p, &["parser"])["total"], 3);
    // A message sent after the last refresh is found by the next query.
    let late = note(&p, "coder", "reviewer", "zebra crossing");
    assert_eq!(hits(&search(&p, &["zebra"])), [late]);
    // An index that says a message is there that the files no longer hold
    // does not show it: the files answer.
    let v = search(&p, &["lexer", "tabs"]);
    let path = v["hits"][0]["path"].as_str().unwrap().to_string();
    std::fs::remove_file(&path).unwrap();
    let v = search(&p, &["lexer", "tabs"]);
    assert!(hits(&v).is_empty(), "{v}");
    let _ = ids;
}

#[test]
fn a_query_cannot_make_the_index_read_outside_the_project() {
    let (p, _) = exchange();
    p.deliver_once().ok();
    search(&p, &["parser"]);
    // A segment planted outside the project, and a manifest naming it: the
    // name is refused and the index rebuilt from the project's own files.
    let outside = tempfile::tempdir().unwrap();
    let planted = outside.path().join("seg-1.terms");
    std::fs::write(&planted, [0u8; 20]).unwrap();
    let manifest = p.path(".swarmforge/search/manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let rel = format!(
        "../../../../../../../..{}",
        outside.path().join("seg-1").display()
    );
    let mut m: Value = serde_json::from_str(&text).unwrap();
    m["segments"] = json!([{"name": rel, "docs": 1}]);
    std::fs::write(&manifest, m.to_string()).unwrap();
    let r = p.swarm(&["search", "--json", "parser"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stderr.contains("is not of the form seg-<digits>")
            && r.stderr.contains("swarm search --reindex"),
        "{}",
        r.stderr
    );
    p.swarm(&["search", "--reindex"]).ok();
    assert_eq!(search(&p, &["parser"])["total"], 3);
    // The index folder a symlink to elsewhere: refused, naming it.
    let dir = p.path(".swarmforge/search");
    std::fs::remove_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(outside.path(), &dir).unwrap();
    let r = p.swarm(&["search", "parser"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains(&format!("{}: not a folder", dir.display())),
        "{}",
        r.stderr
    );
    assert!(!outside.path().join("manifest.json").exists());
    let r = p.swarm(&["search", "--reindex"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(!outside.path().join("manifest.json").exists());
}

#[test]
fn the_daemon_keeps_the_index_off_the_delivery_path() {
    let p = Project::coder_and_reviewer();
    let _d = p.spawn_daemon(&[]);
    for i in 0..5 {
        note(&p, "coder", "reviewer", &format!("walrus number {i}"));
    }
    let manifest = p.path(".swarmforge/search/manifest.json");
    // No query ran: the daemon's indexer wrote this.
    wait_until(DEADLINE, "the daemon indexed all five", || {
        std::fs::read_to_string(&manifest)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .is_some_and(|m| {
                m["segments"].as_array().is_some_and(|s| {
                    s.iter()
                        .map(|s| s["docs"].as_u64().unwrap_or(0))
                        .sum::<u64>()
                        == 5
                })
            })
    });
    assert_eq!(search(&p, &["walrus"])["total"], 5);
}

#[test]
fn the_mcp_search_tool_answers_what_the_cli_does() {
    let Some(py) = crate::mcp::python() else {
        return;
    };
    let (p, ids) = exchange();
    p.deliver_once().ok();
    let mut c = crate::mcp::Client::start(&py, &p, "reviewer", &[]);
    let v = c.ok("search", json!({"query": "parser", "limit": 2}));
    assert_eq!(v["total"], 3, "{v}");
    assert_eq!(
        hits(&v),
        [ids[1].clone(), hits(&search(&p, &["parser"]))[1].clone()]
    );
    let v = c.ok(
        "search",
        json!({"query": "lexer", "role": "coder", "type": "note", "since": "1d"}),
    );
    assert_eq!(v["total"], 2, "{v}");
    let e = c.call("search", json!({"query": "..."}));
    assert_eq!(e["is_error"], true, "{e}");
    assert!(
        e["text"]
            .as_str()
            .unwrap()
            .contains("nothing to search for"),
        "{e}"
    );
    let e = c.call("search", json!({"query": "x", "path": "/etc"}));
    assert_eq!(e["is_error"], true, "{e}");
}

/// On one host of a multi-host swarm (a real nats-server, two hosts), a
/// search also finds what the roles on the other host said, from the mirror
/// of their files this host keeps (docs/bridge.md), marked with their host.
#[test]
fn a_search_finds_the_other_hosts_messages_in_its_mirror() {
    use crate::bridge::{id_of, note, start_all, swarm, Nats, LONG, TWO};
    let Some(nats) = Nats::start() else { return };
    let (_hub, mut hosts) = swarm(&nats, &["a", "b"], TWO);
    start_all(&mut hosts);
    let (a, b) = (&hosts[0], &hosts[1]);
    let ping_said = id_of(&a.send("ping", &note("pong", "where is the walrus")));
    let pong_said = id_of(&b.send("pong", &note("ping", "the walrus sleeps on b")));
    for (h, local, remote, host) in [
        (a, &ping_said, &pong_said, "b"),
        (b, &pong_said, &ping_said, "a"),
    ] {
        wait_until(
            LONG,
            &format!("host {host}'s message is found on the other host"),
            || search(&h.p, &["walrus"])["total"] == 2,
        );
        let v = search(&h.p, &["walrus"]);
        let hit = |id: &str| {
            v["hits"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["id"] == id)
                .cloned()
                .unwrap_or_else(|| panic!("{id} not in {v}"))
        };
        assert_eq!(hit(remote)["host"], host, "{v}");
        assert!(
            hit(remote)["path"]
                .as_str()
                .unwrap()
                .contains(&format!(".swarmforge/bridge/hosts/{host}/")),
            "{v}"
        );
        assert_eq!(hit(local)["host"], Value::Null, "{v}");
        // The text says so: "sleeps" is pong's, on host b.
        let r = h.p.swarm(&["search", "sleeps"]);
        r.ok();
        assert_eq!(r.stdout.contains("on host b"), host == "b", "{}", r.stdout);
        assert!(r.stdout.contains("1 of 1 matching"), "{}", r.stdout);
    }
}

/// The bytes of every file under `dir`.
fn bytes_under(dir: &std::path::Path) -> u64 {
    walk(dir)
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum()
}

/// Issue 43.14: an agent writes many large files of distinct words into its
/// own `failed/`. The index takes in only its bounds' worth (swarm.yaml
/// `search:`, scaled down here): each message's first bytes, a refresh's
/// budget at a time, the role's share in all; the index on disk stays
/// small, another role's message is still found, and every answer says
/// what was left out and in which folder.
#[test]
fn a_hostile_agent_flooding_its_folders_cannot_blow_up_the_index() {
    let p = Project::builder()
        .role("coder")
        .role(Role::new("reviewer").worktree("rev"))
        .config(
            "wake: {method: none}\nsearch: {max_message_bytes: 4096, max_pass_bytes: 32768, \
             max_pass_total_bytes: 65536, max_role_bytes: 131072, max_index_bytes: 8388608}\n",
        )
        .build();
    let benign = note(&p, "coder", "reviewer", "the needle is in the parser");
    // The hostile agent: 40 files of 200 KB of words never said twice.
    let failed = hq(&p.role_dir("reviewer"), "failed");
    for f in 0..40u32 {
        let n = crate::support::note("reviewer", f + 1, "coder", "flood");
        let mut text = n.text.clone();
        let mut k = 0;
        while text.len() < 200_000 {
            text.push_str(&format!("w{f}x{k} "));
            k += 1;
            if k % 16 == 0 {
                text.push('\n');
            }
        }
        crate::support::publish(&failed.join(&n.name), text.as_bytes());
    }
    let v = search(&p, &["needle"]);
    assert_eq!(hits(&v), std::slice::from_ref(&benign), "{v}");
    let inc = &v["incomplete"];
    assert!(inc["unindexed"].as_u64().unwrap_or(0) > 0, "{v}");
    assert!(inc["cut"].as_u64().unwrap_or(0) > 0, "{v}");
    let folders = inc["folders"].to_string();
    assert!(
        folders.contains(".worktrees/rev/.swarmforge/handoffs/failed"),
        "{v}"
    );
    // A message's first bytes are found, what lies past its bound is not.
    assert_eq!(search(&p, &["w0x1"])["total"], 1);
    assert_eq!(search(&p, &["w0x20000"])["total"], 0);
    // The index on disk: a bounded share of the 8 MB written, not a
    // multiple of it.
    let index = p.path(".swarmforge/search");
    let size = bytes_under(&index);
    assert!(size < 2 * 1024 * 1024, "the index takes {size} bytes");
    // The person is told, in text too, and where to look.
    p.swarm(&["search", "needle"])
        .ok()
        .stdout_has("results may be incomplete")
        .stdout_has(".worktrees/rev/.swarmforge/handoffs/failed (");
    // A rebuild keeps to the same bounds and reports what it left out.
    let r = p.swarm(&["search", "--reindex", "--json"]);
    r.ok();
    let r = r.json();
    assert!(r["unindexed"].as_u64().unwrap_or(0) > 0, "{r}");
    assert!(r["cut"].as_u64().unwrap_or(0) > 0, "{r}");
    assert!(
        r["disk_bytes"].as_u64().unwrap_or(u64::MAX) < 2 * 1024 * 1024,
        "{r}"
    );
    assert!(bytes_under(&index) < 2 * 1024 * 1024);
    assert_eq!(hits(&search(&p, &["needle"])), [benign], "after --reindex");
}

/// Nothing left out: `incomplete` is null and the text says nothing of it.
#[test]
fn an_index_within_its_bounds_says_it_is_complete() {
    let (p, _) = exchange();
    let v = search(&p, &["parser"]);
    assert!(
        v.as_object().unwrap().contains_key("incomplete") && v["incomplete"].is_null(),
        "{v}"
    );
    let r = p.swarm(&["search", "parser"]);
    r.ok();
    assert!(!r.stdout.contains("incomplete"), "{}", r.stdout);
}
