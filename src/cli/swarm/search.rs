//! `swarm search <query> [--role R] [--type T] [--since T] [--json]`.

use crate::error::{Error, Result};
use crate::protocol::clock;
use crate::search::{self, query, Answer, Index, Query};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Every word of the query must occur in a message (its header values and body; \
case does not matter); hits are ranked by BM25, newer first on a tie. Messages \
archived by `swarm archive` are searched too.

Text: one hit per line, `N. [YYYY-MM-DD HH:MM:SS] <id> [FROM -> TO] <type> <summary> (<state>)`, \
then the lines of the body around the first match, indented; last, `<shown> of <total> matching`.
--json: one object {status, query, total, indexed, incomplete, hits: [{id, score, time, from, \
to, type, state, archived, path, summary, snippet, unverified}]} (docs/json.md); a message \
the journal does not vouch for (a file rewritten since handoffd moved it, or one it never \
moved) is `N. <id> [unverified] <path>: <why>`, its sender and words left out; incomplete (null when \
nothing was) says what the index's bounds (swarm.yaml search:) left out, and where.

The index lives in .swarmforge/search/, derived from the message files: the daemon keeps it \
up to date off its delivery path and every query catches it up first; --reindex throws it \
away and builds it again (docs/search.md).")]
pub struct Args {
    /// The words to look for
    #[arg(value_name = "QUERY")]
    pub query: Vec<String>,
    /// Only messages sent or received by this role
    #[arg(long, value_name = "ROLE")]
    pub role: Option<String>,
    /// Only messages of this type (git_handoff, note, post, ...)
    #[arg(long = "type", value_name = "TYPE")]
    pub kind: Option<String>,
    /// Only messages created from this time on (RFC 3339, or an age such as 90s, 2h, 1d)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Most hits shown
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
    /// Rebuild the index from the message files (then search, if a query is given)
    #[arg(long)]
    pub reindex: bool,
    /// One JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

enum Done {
    Reindexed(search::Refreshed),
    Found(Answer),
}

fn act(args: &Args) -> Result<Done> {
    let project = super::project(None)?;
    let text = args.query.join(" ");
    if args.limit == 0 || args.limit > query::MAX_LIMIT {
        return Err(Error::bad_input(format!(
            "--limit must be from 1 to {}; got {}",
            query::MAX_LIMIT,
            args.limit
        )));
    }
    let since = args
        .since
        .as_deref()
        .map(|s| crate::views::transcript::parse_time(s, clock::now()).map(|t| t.timestamp()))
        .transpose()?;
    let reindexed = if args.reindex {
        Some(Index::new(&project).reindex()?)
    } else {
        None
    };
    if text.trim().is_empty() {
        if let Some(r) = reindexed {
            return Ok(Done::Reindexed(r));
        }
    }
    let q = Query {
        text,
        role: args.role.clone(),
        kind: args.kind.clone(),
        since,
        limit: args.limit,
    };
    search::search(&project, &q).map(Done::Found)
}

/// The text form of an answer (also what the MCP tool's text is built from).
pub fn text(a: &Answer) -> String {
    let mut s = String::new();
    for (i, h) in a.hits.iter().enumerate() {
        let when = h
            .time
            .as_deref()
            .map(|t| t.get(..19).unwrap_or(t).replacen('T', " ", 1))
            .unwrap_or_default();
        let mut state = h.state.to_string();
        if h.archived {
            state.push_str(", archived");
        }
        if let Some(host) = &h.host {
            state.push_str(&format!(", on host {}", crate::text::escape(host)));
        }
        if let Some(why) = &h.unverified {
            s.push_str(&format!(
                "{}. {} [unverified] {}: {} ({state})\n",
                i + 1,
                h.id,
                crate::text::escape(&h.path.display().to_string()),
                crate::text::escape(why)
            ));
            continue;
        }
        s.push_str(&format!(
            "{}. [{when}] {} [{} -> {}] {} {} ({state})\n",
            i + 1,
            h.id,
            crate::text::escape(&h.from),
            crate::text::escape(&h.to),
            crate::text::escape(&h.kind),
            h.summary
        ));
        if !h.snippet.is_empty() {
            s.push_str(&format!("    {}\n", h.snippet));
        }
    }
    if a.total == 0 {
        s.push_str(&format!(
            "no message matches '{}' ({} indexed)\n",
            crate::text::escape(&a.query),
            a.indexed
        ));
    } else {
        s.push_str(&format!("{} of {} matching\n", a.hits.len(), a.total));
    }
    if let Some(i) = &a.incomplete {
        s.push_str(&i.note());
    }
    s
}

pub fn run(args: Args) -> i32 {
    match act(&args) {
        Ok(Done::Reindexed(r)) => {
            if args.json {
                crate::cli::emit_json(serde_json::json!({
                    "status": "ok", "reindexed": true, "indexed": r.docs, "segments": r.segments,
                    "cut": r.cut, "unindexed": r.unindexed, "disk_bytes": r.disk_bytes,
                }));
            } else {
                crate::cli::out(&format!(
                    "REINDEXED: {} messages in {} segment(s)\n",
                    r.docs, r.segments
                ));
                if r.unindexed > 0 || r.cut > 0 {
                    crate::cli::out(&format!(
                        "  over the index's bounds (swarm.yaml search:): {} message(s) not indexed, \
                         {} indexed only in part; `swarm search` names their folders\n",
                        r.unindexed, r.cut
                    ));
                }
            }
            crate::error::exit::OK
        }
        Ok(Done::Found(a)) => {
            if args.json {
                let mut v = serde_json::to_value(&a).unwrap_or_default();
                v["status"] = "ok".into();
                crate::cli::emit_json(v);
            } else {
                crate::cli::out(&text(&a));
            }
            crate::error::exit::OK
        }
        Err(e) => crate::cli::report(&e, args.json),
    }
}
