//! The protocol primer: what a role's agent is told (`swarm prompt <role>`).
//! Who it is and its job, its peers, how to take, finish and hand on work
//! (a draft for every type it may send, from the type table), how to ask a
//! person, the forum when one is configured, and when to stop. Kept short:
//! it is paid for in context on every session.

use crate::error::{Error, Result};
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};
use crate::protocol::types::{self, TypeRule};

/// What a confined agent meets (docs/security.md, "Confinement"), said
/// before it tries to "fix" a read-only file system.
const SANDBOX: &str = "\n## Your sandbox\n\nYou run confined: you can write your worktree, your home and `/tmp`; the rest of the project and the system are read-only, on purpose. Git: commit, amend, rebase and reset on your own branch (`swarmforge-<your worktree>`, checked out on `refs/worktree/swarmforge`, so `git branch --show-current` prints nothing); new branches, tags, `git stash`, `git checkout -b` and pushes are refused (read-only file system). Do not try to work around either.\n";

/// A placeholder per draft header (the headers come from the type table).
fn placeholder(field: &str) -> &'static str {
    match field {
        "task" => "<short-stable-name>",
        "commit" => "<10-hex commit: git rev-parse --short=10 HEAD>",
        "message" => "<one line, at most 80 characters>",
        "subject" => "<one line>",
        "question" => "<the question>",
        "allow_multiple" | "allow_custom" => "no",
        "choices" => "<option numbers, e.g. 1,3>",
        "reason" => "<why, one line>",
        "in_reply_to" => "<id of the message you answer>",
        _ => "<value>",
    }
}

fn draft(rule: &TypeRule, to: &str) -> String {
    let mut s = format!("type: {}\nto: {to}\npriority: 50\n", rule.name);
    if rule.name == types::ANSWER.name {
        s.push_str(&format!("in_reply_to: {}\n", placeholder("in_reply_to")));
    }
    for f in rule.own {
        s.push_str(&format!("{f}: {}\n", placeholder(f)));
    }
    if rule.body {
        let body = match rule.name {
            "clarify" => "<option 1>\n<option 2>",
            _ => "<text>",
        };
        s.push_str(&format!("\n{body}\n"));
    }
    s
}

fn who(r: &PlannedRole) -> &'static str {
    if r.is_human() {
        "person"
    } else {
        "agent"
    }
}

/// The primer for `role`.
pub fn primer(plan: &Plan, role: &str) -> Result<String> {
    let me = planned_role(plan, role)?;
    if me.is_human() {
        return Ok(person_primer(plan, me));
    }
    let peers: Vec<&PlannedRole> = plan.roles.iter().filter(|r| r.name != role).collect();
    let mut s = job_section(plan, me);
    s.push_str(&peers_section(plan, &peers));
    if crate::launch::confine::enabled(plan) && me.agent != AgentSpec::Api {
        s.push_str(SANDBOX);
    }
    // `mcp: true`: the agent has the `swarm` MCP server's tools; teach
    // those, not the shell wrappers (docs/mcp.md).
    if plan.config.role(role).is_some_and(|r| r.mcp) {
        s.push_str(&mcp_sections(plan, role, &peers));
        return Ok(s);
    }
    s.push_str(&work_section(me.mode.as_str() == "batch"));
    s.push_str(&sending_sections(plan, role, &peers));
    if let Some(m) = plan.config.forum.moderator.as_deref() {
        s.push_str(&format!(
            "\n## Forum\n\nPosts, notes and handoffs sent while a session is open belong to it. `{m}` moderates: every {} contributions it gets a `digest_request` and answers with a `digest` to `all`; your `ready-next` then shows `LATEST_DIGEST:`. In a round-robin discussion add `discussion: <id>` to your draft, and send only on your turn (`swarm can-send --discussion <id>` exits 0 then).\n",
            plan.config.forum.digest_every
        ));
    }
    s.push_str("\n## When to stop\n\nWhen `ready_for_next.sh` prints `NO_TASK`, end your turn and wait; do not poll. New mail wakes you with \"You have new handoff mail. If idle, run ready_for_next.sh.\" Never end a turn with an item in process unless you sent a `clarify` about it.\n");
    Ok(s)
}

/// The role named `role`, or which roles there are.
fn planned_role<'a>(plan: &'a Plan, role: &str) -> Result<&'a PlannedRole> {
    plan.roles.iter().find(|r| r.name == role).ok_or_else(|| {
        Error::not_found(format!(
            "no role '{}' in {}\n  hint: one of: {}",
            crate::text::escape(role),
            plan.source.path().display(),
            plan.roles
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// The heading and the agent's job: its configured prompt or
/// description, else where to find it.
fn job_section(plan: &Plan, me: &PlannedRole) -> String {
    let role = me.name.as_str();
    let mut s = format!(
        "# Swarm role: {role}\n\nYou are the agent of role `{role}` in a swarm of agents that hand work to each other through files (swarm-handoff). You work in {}.\n\n## Your job\n\n",
        me.worktree_path.display()
    );
    match plan
        .config
        .role(role)
        .and_then(|r| r.prompt.clone().or_else(|| r.description.clone()))
    {
        Some(job) => s.push_str(job.trim_end()),
        None if matches!(me.agent, AgentSpec::Model { .. }) => s.push_str(&format!(
            "Your job is in swarmforge/roles/{role}.prompt and swarmforge/constitution.prompt (read them first)."
        )),
        None => s.push_str("No job was configured for this role: do what the messages you receive ask."),
    }
    s
}

/// Each peer, agent or person, with the first line of what it does.
fn peers_section(plan: &Plan, peers: &[&PlannedRole]) -> String {
    let about = |name: &str| {
        plan.config
            .role(name)
            .and_then(|r| r.description.clone().or_else(|| r.prompt.clone()))
            .map(|d| d.lines().next().unwrap_or("").trim().to_string())
    };
    let mut s = String::from("\n\n## Your peers\n\n");
    if peers.is_empty() {
        s.push_str("None.\n");
    }
    for p in peers {
        s.push_str(&format!("- `{}` ({})", p.name, who(p)));
        if let Some(d) = about(&p.name) {
            s.push_str(&format!(": {d}"));
        }
        s.push('\n');
    }
    s
}

/// How to take work (one item, or a batch) and finish it with the shell
/// wrappers.
fn work_section(batch: bool) -> String {
    format!(
        "\n## Taking and finishing work\n\n1. Run `ready_for_next.sh`. It prints `NO_TASK`, or {} with `FROM:`, `TYPE:` and `PAYLOAD:`.\n2. Do what it asks, here in your worktree; commit code with git.\n3. Run `done_with_current.sh`: it completes the item and prints `MAIL_WAITING` (more work waits: run `ready_for_next.sh` again) or `NO_TASK`.\n\nIf `ready_for_next.sh` refuses with `WAITING_FOR_APPROVAL`, a `git_handoff` you sent has not left yet (handoffd has not delivered it, or a person has not approved it): stop, you are woken when work can go on.\n\nOne item at a time. Never edit or move files under `.swarmforge/` yourself.\n",
        if batch { "a batch of every waiting item (`BATCH:`)" } else { "one item (`TASK:`)" }
    )
}

/// How to send (a draft for each type the role may send, from the type
/// table) and, when it may send a `clarify` to a person, how to ask one.
fn sending_sections(plan: &Plan, role: &str, peers: &[&PlannedRole]) -> String {
    let aud = audience(plan, role, peers);
    let (sendable, human) = (&aud.sendable, aud.human);
    let mut s = String::from("\n## Sending\n\n");
    if sendable.is_empty() {
        s.push_str("You may not send messages; finish items with `done_with_current.sh`.\n");
    } else {
        s.push_str(&format!(
            "Write a draft file here in your worktree (a draft outside the project, e.g. in /tmp, is refused), then run `swarm_handoff.sh <file>`. `HANDOFF QUEUED` means sent (the draft is deleted); `HANDOFF INVALID` lists what to fix. `to:` is a role, roles separated by commas, or `all`; `priority:` 00-99, lower goes first. Any draft may add `in_reply_to: <id>` and `cc: <role>`. You may send {}:\n",
            types::list_in_words(&sendable.iter().map(|t| t.name).collect::<Vec<_>>())
        ));
        for t in sendable {
            let to = aud.to(t);
            s.push_str(&format!("\n```\n{}```\n", draft(t, to)));
        }
    }
    if let (Some(h), true) = (
        human,
        sendable.iter().any(|t| t.name == types::CLARIFY.name),
    ) {
        s.push_str(&format!(
            "\n## Asking a person\n\nWhen you cannot finish the item in process without a decision:\n\n1. Send a `clarify` to `{h}` (the question in `question:`, options one per body line).\n2. Do not run `done_with_current.sh`: the item stays in process (parked) until the answer arrives.\n3. End your turn.\n4. When you are woken, run `ready_for_next.sh`: it prints the same item again with an `ANSWER:` block (`ANSWER_CHOICE:`, `ANSWER_TEXT:`).\n5. Finish the item with that answer, then run `done_with_current.sh`.\n"
        ));
    }
    s
}

/// Where `name` is first named in `text` as a word (`lead`, `@lead`,
/// `` `lead` ``), not inside a longer name (`leader`).
fn mention_at(text: &str, name: &str) -> Option<usize> {
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(name).map(|(i, _)| i).find(|&i| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        !before.is_some_and(is_name_char) && !after.is_some_and(is_name_char)
    })
}

/// What a person in a human role is told: where their mail waits and the
/// commands that read, answer and finish it; no agent loop.
fn person_primer(plan: &Plan, me: &PlannedRole) -> String {
    let role = &me.name;
    let inbox = crate::protocol::layout::Worktree::new(&me.worktree_path).inbox();
    let mut s = format!(
        "# Swarm role: {role}\n\nYou are the person in role `{role}` of a swarm of agents that hand work to each other through files (swarm-handoff). Nothing is started for you and nothing wakes you: the swarm waits for you. Your mail waits in {} and only you take it.\n\n## Your mail\n\n- `swarm inbox` lists what waits for you (id, sender, type, age, summary) with the command that handles each; `swarm status` and the cockpit (`swarm serve`) list it too.\n- `swarm inbox show <id>` prints one item whole.\n- A question (`clarify`): `swarm answer <id> --choice N` (repeat `--choice` when several are allowed) or `--text \"...\"`. The asker keeps its item parked until then and gets your answer with it.\n- Anything else: `swarm inbox done <id>` when you have read or handled it, so receipts and `swarm audit` show you did.\n\nAn id may be shortened to any unique prefix (`swarm transcript --ids` shows them).\n",
        inbox.display()
    );
    let peers: Vec<&PlannedRole> = plan.roles.iter().filter(|r| r.name != *role).collect();
    if !peers.is_empty() {
        s.push_str("\n## The swarm\n\n");
        for p in &peers {
            s.push_str(&format!("- `{}` ({})\n", p.name, who(p)));
        }
    }
    let allowed = plan.config.allowed_types(role);
    let sendable: Vec<&'static TypeRule> = allowed
        .iter()
        .filter_map(|t| types::type_rule(t))
        .filter(|t| !matches!(t.name, "digest" | "answer"))
        .collect();
    if !sendable.is_empty() {
        let to = peers
            .iter()
            .find(|p| !p.is_human())
            .map_or("<role>", |p| p.name.as_str());
        s.push_str(&format!(
            "\n## Sending\n\nWrite a draft file in {dir} (a draft outside the project is refused) and run `SWARMFORGE_ROLE={role} swarm-handoff <file>` there; it is deleted once queued. You may send {}, e.g.:\n\n```\n{}```\n",
            types::list_in_words(&sendable.iter().map(|t| t.name).collect::<Vec<_>>()),
            draft(
                sendable
                    .iter()
                    .find(|t| t.name == types::NOTE.name)
                    .unwrap_or(&sendable[0]),
                to
            ),
            dir = me.workdir().display(),
        ));
    }
    s
}

/// What a role may send and to whom its examples go.
struct Audience<'a> {
    sendable: Vec<&'static TypeRule>,
    /// An agent peer (else any peer): the examples' `to`.
    first_peer: &'a str,
    /// A person, for `clarify`.
    human: Option<&'a str>,
}

impl Audience<'_> {
    /// The recipient of type `t`'s example.
    fn to(&self, t: &TypeRule) -> &str {
        match t.name {
            "clarify" => self.human.unwrap_or(self.first_peer),
            "digest" => "all",
            _ => self.first_peer,
        }
    }
}

fn audience<'a>(plan: &Plan, role: &str, peers: &[&'a PlannedRole]) -> Audience<'a> {
    let moderator = plan.config.forum.moderator.as_deref();
    // Drafts address the peers the job names, in the order it names them;
    // else the first agent (or person) among the peers.
    let job = plan
        .config
        .role(role)
        .and_then(|r| r.prompt.clone().or_else(|| r.description.clone()))
        .unwrap_or_default();
    let named = |want_human: bool| -> Option<&'a str> {
        peers
            .iter()
            .filter(|p| p.is_human() == want_human)
            .filter_map(|p| mention_at(&job, &p.name).map(|at| (at, p.name.as_str())))
            .min()
            .map(|(_, n)| n)
    };
    Audience {
        sendable: plan
            .config
            .allowed_types(role)
            .iter()
            .filter_map(|t| types::type_rule(t))
            .filter(|t| t.name != types::DIGEST.name || moderator == Some(role))
            .collect(),
        first_peer: named(false)
            .or(peers
                .iter()
                .find(|p| !p.is_human())
                .or(peers.first())
                .map(|p| p.name.as_str()))
            .unwrap_or("<role>"),
        human: named(true).or(peers.iter().find(|p| p.is_human()).map(|p| p.name.as_str())),
    }
}

/// The work, sending and stopping sections for an `mcp: true` role: the
/// `swarm` server's tools, with the same drafts given as arguments.
fn mcp_sections(plan: &Plan, role: &str, peers: &[&PlannedRole]) -> String {
    let mut s = String::from(
        "\n## Taking and finishing work\n\nYou have the tools of the `swarm` MCP server (Claude Code lists them as `mcp__swarm__<tool>`); use them, not shell scripts.\n\n1. Call `next`. It returns status `no_task`, or your item with its `from`, `type` and `body`.\n2. Do what it asks, here in your worktree; commit code with git.\n3. Call `done` (with `failed: <why>` if it could not be done): it completes the item and returns the next one, or `no_task`.\n\nOne item at a time. Never edit or move files under `.swarmforge/` yourself.\n",
    );
    let aud = audience(plan, role, peers);
    let (sendable, human) = (&aud.sendable, aud.human);
    s.push_str("\n## Sending\n\n");
    if sendable.is_empty() {
        s.push_str("You may not send messages; finish items with `done`.\n");
    } else {
        s.push_str(&format!(
            "Call `send` with `type`, `to` (a role, roles separated by commas, or `all`), `priority` (00-99, lower first) and the type's fields as arguments; `status: queued` means sent, `invalid` lists what to fix. `reply` answers the item in process. You may send {}:\n",
            types::list_in_words(&sendable.iter().map(|t| t.name).collect::<Vec<_>>())
        ));
        for t in sendable {
            let to = aud.to(t);
            let mut args = format!("type: {}, to: {to}", t.name);
            for f in t.own {
                args.push_str(&format!(", {f}: {}", placeholder(f)));
            }
            if t.body {
                args.push_str(", body: <text>");
            }
            s.push_str(&format!("- `send` {{{args}}}\n"));
        }
    }
    if let (Some(h), true) = (
        human,
        sendable.iter().any(|t| t.name == types::CLARIFY.name),
    ) {
        s.push_str(&format!(
            "\n## Asking a person\n\nWhen you cannot go on without a decision, call `ask` with `to: {h}`, the `question` and its `options`, then `done`, and end your turn. The answer comes back with your item.\n"
        ));
    }
    s.push_str("\n## When to stop\n\nWhen `next` returns `no_task`, end your turn and wait; do not poll. New mail wakes you with \"You have new handoff mail. If idle, run ready_for_next.sh.\": that means call `next`. Never end a turn with an item in process unless you asked a person about it.\n");
    s
}

/// A rough token count (bytes / 4), the figure docs/agents.md quotes.
pub fn approx_tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}
