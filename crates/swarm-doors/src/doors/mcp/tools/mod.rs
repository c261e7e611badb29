//! The tools `swarm mcp` offers, synchronous: each call builds a draft (or
//! a queue step) and goes through the same code as `swarm-handoff`,
//! `ready-next`, `done-current`, `swarm answer`, `swarm transcript` and
//! `swarm status`, so the files, the locks, the validation and the error
//! texts are the CLI's. Nothing is kept between calls.
//!
//! Each tool is one argument type with its name and description beside it
//! ([`Tool`]), in the file of its kind (`queue`, `talk`, `look`, `files`);
//! [`TOOLS`] lists them once, for `tools/list` and for the calls.

mod files;
mod look;
mod queue;
mod talk;

use std::borrow::Cow;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use super::args;
use crate::error::{exit, Error};
use files::{Release, Reservations, Reserve};
use look::{Read, Search, Status};
use queue::{Done, Next};
use talk::{Answer, Ask, React, Reply, SendArgs};

/// Who the server acts as and where: the role and the folder it was started
/// in (the project and worktree are found from it on every call).
#[derive(Clone, Debug)]
pub struct Agent {
    pub role: String,
    pub cwd: PathBuf,
}

/// `next`'s default and longest wait: clients time a tool call out after
/// 30-60 s, so the answer must come before that.
pub const DEFAULT_WAIT_SECS: u64 = 25;
pub const MAX_WAIT_SECS: u64 = 50;

/// A refused call: the CLI's message (stderr) and its `--json` object.
#[derive(Debug)]
pub struct Refusal {
    pub text: String,
    pub json: Value,
}

impl From<Error> for Refusal {
    fn from(e: Error) -> Refusal {
        match &e {
            // The same object `swarm-handoff --json` prints for an invalid draft.
            Error::Invalid {
                token,
                subject,
                errors,
            } => Refusal {
                text: e.to_string(),
                json: json!({
                    "status": "invalid",
                    "token": token.name(),
                    "draft": subject,
                    "errors": errors,
                    "exit_code": exit::REFUSED,
                }),
            },
            _ => Refusal {
                text: e.to_string(),
                json: e.to_json(),
            },
        }
    }
}

fn usage(msg: impl Into<String>) -> Refusal {
    let text = msg.into();
    Refusal {
        json: json!({"status": "error", "token": "USAGE", "message": text, "paths": [], "exit_code": exit::ENV}),
        text,
    }
}

type Outcome = Result<Value, Refusal>;

// ---------------------------------------------------------------- the tools

/// One tool: its name and description next to its argument type, from
/// which the input schema is derived ([`args::input_schema`]) and each
/// call's arguments are read ([`args::parse`]), and what a call does.
///
/// rmcp's own router (`#[tool_router]`, `SyncTool`) is not used: it answers
/// a refusal or a malformed argument with a JSON-RPC error, where the
/// tools answer with a tool error carrying the CLI's text and `--json`
/// object, and its schema helper adds a meta-schema, `null` types and
/// formats every agent would pay for in context on every turn.
trait Tool: JsonSchema + DeserializeOwned {
    const NAME: &'static str;
    /// Kept short on purpose: every agent pays for it in context on every
    /// turn (docs/mcp.md).
    const DESCRIPTION: &'static str;
    /// [`Self::DESCRIPTION`] with what it names filled in.
    fn description() -> Cow<'static, str> {
        Self::DESCRIPTION.into()
    }
    fn run(self, agent: &Agent) -> Outcome;
}

/// A tool with its argument type erased: what `tools/list` sends, and the
/// call.
pub struct Entry {
    pub name: &'static str,
    definition: fn() -> rmcp::model::Tool,
    call: fn(&Agent, &Map<String, Value>) -> Outcome,
}

const fn entry<T: Tool>() -> Entry {
    Entry {
        name: T::NAME,
        definition: definition::<T>,
        call: call_as::<T>,
    }
}

fn definition<T: Tool>() -> rmcp::model::Tool {
    rmcp::model::Tool::new(T::NAME, T::description(), args::input_schema::<T>())
}

fn call_as<T: Tool>(agent: &Agent, map: &Map<String, Value>) -> Outcome {
    args::parse::<T>(map)
        .map_err(|why| usage(format!("{}: {why}", T::NAME)))?
        .run(agent)
}

/// Every tool, in the order `tools/list` gives them.
pub const TOOLS: &[Entry] = &[
    entry::<Next>(),
    entry::<Done>(),
    entry::<SendArgs>(),
    entry::<Reply>(),
    entry::<Ask>(),
    entry::<Answer>(),
    entry::<React>(),
    entry::<Read>(),
    entry::<Status>(),
    entry::<Search>(),
    entry::<Reserve>(),
    entry::<Release>(),
    entry::<Reservations>(),
];

/// The tool named `name`, if it is one of ours.
pub fn find(name: &str) -> Option<&'static Entry> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The tool definitions as `tools/list` sends them.
pub fn definitions() -> Vec<rmcp::model::Tool> {
    TOOLS.iter().map(|t| (t.definition)()).collect()
}

/// Runs tool `name` for `agent`. Blocking (file I/O, and `next` waits): the
/// server calls it off its runtime.
pub fn call(agent: &Agent, name: &str, args: Option<&Map<String, Value>>) -> Outcome {
    let none = Map::new();
    match find(name) {
        Some(t) => (t.call)(agent, args.unwrap_or(&none)),
        None => Err(usage(format!(
            "unknown tool '{}'.",
            crate::text::escape(name)
        ))),
    }
}

#[cfg(test)]
mod tests;
