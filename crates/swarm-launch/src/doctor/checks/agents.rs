//! The agents' CLIs: installed, trusting their worktrees (and the other
//! dialogs they show at start), and able to run as configured (sandbox
//! helpers, root, confinement).

use super::super::{Context, Finding};
use crate::launch::agents::codex_sandbox;
use crate::launch::agents::gemini_sandbox;
use crate::launch::agents::ALL;
use crate::launch::command::{missing_hint, missing_programs};
use crate::launch::trust;
use crate::launch::trust::Stores;
use crate::protocol::swarmforge_conf::is_command;

/// Every agent program that is not installed, all at once.
pub fn agent_cli_missing(cx: &Context) -> Vec<Finding> {
    let Ok(plan) = &cx.plan else {
        return no_agent_cli(cx);
    };
    missing_programs(plan, false)
        .iter()
        .map(|m| {
            Finding::new(
                "AGENT_CLI_MISSING",
                format!(
                    "'{}' (the agent of {}) is not installed on PATH",
                    m.program,
                    m.roles.join(", ")
                ),
                missing_hint(plan, m),
            )
            .at(plan.source.path())
        })
        .collect()
}

/// Before any roles are written (no `swarm.yaml`, no `swarmforge.conf`),
/// which agent will run is not known: at least one of the coding CLIs the
/// presets start should be installed.
fn no_agent_cli(cx: &Context) -> Vec<Finding> {
    if cx.project.config_file().exists() || cx.project.swarmforge_conf().exists() {
        return Vec::new();
    }
    let names: Vec<&str> = ALL.iter().map(|c| c.name()).collect();
    if names.iter().any(|n| is_command(n)) {
        return Vec::new();
    }
    vec![Finding::new(
        "AGENT_CLI_MISSING",
        format!(
            "no agent CLI is installed: none of {} is on PATH",
            names.join(", ")
        ),
        "install the one your agents will use (docs/agents.md); a swarm of scripted agents needs none (`swarm init --example pipeline`)",
    )]
}

/// Agent CLIs that will stop at their folder-trust dialog before their
/// first turn: a worktree of this swarm that the CLI's own store (in this
/// user's HOME) does not trust (launch::trust, docs/agents.md).
pub fn agent_cli_trust(cx: &Context) -> Vec<Finding> {
    let Ok(plan) = &cx.plan else {
        return Vec::new();
    };
    // Only the preset CLIs have trust dialogs.
    if !plan.roles.iter().any(|r| trust::cli_of(r).is_some()) {
        return Vec::new();
    }
    let stores = match Stores::from(|k| std::env::var_os(k)) {
        Ok(s) => s,
        Err(e) => {
            return vec![Finding::new(
                "AGENT_CLI_TRUST_UNKNOWN",
                format!("cannot tell which worktrees the agent CLIs trust: {e}"),
                "set HOME to the home folder the agent CLIs use",
            )]
        }
    };
    let bypass = trust::unconsented(plan, &stores).into_iter().map(|b| {
        Finding::new(
            "AGENT_CLI_BYPASS_UNACCEPTED",
            format!(
                "role {}: Claude Code with `permission: full` will wait at its bypass-permissions disclaimer: no consent in {}",
                b.role,
                b.file.display()
            ),
            format!(
                "run `swarm trust {}` (or start with `swarm up --trust`) to accept it for this worktree only",
                b.role
            ),
        )
        .at(&b.file)
    });
    let api_key = trust::unanswered_api_key(plan, &stores).map(|k| {
        Finding::new(
            "AGENT_CLI_API_KEY_UNANSWERED",
            format!(
                "role {}: Claude Code will ask whether to use the key in ANTHROPIC_API_KEY and wait: {} holds no answer for it",
                k.roles.join(", "),
                k.file.display()
            ),
            "run `swarm trust` to record your consent to the key (only its last 20 characters, as Claude Code stores them), or answer `swarm attach <role> --choose`, or unset ANTHROPIC_API_KEY",
        )
        .at(&k.file)
    });
    match trust::untrusted(plan, &stores) {
        Ok(needs) => needs
            .into_iter()
            .map(|n| {
                Finding::new(
                    "AGENT_CLI_UNTRUSTED",
                    format!(
                        "role {}: {} has not trusted {}, so it will wait at its trust dialog",
                        n.role,
                        n.cli.name(),
                        n.folder.display()
                    ),
                    format!(
                        "run `swarm trust {}` (or start with `swarm up --trust`)",
                        n.role
                    ),
                )
            })
            .chain(bypass)
            .chain(api_key)
            .collect(),
        Err(e) => vec![Finding::new(
            "AGENT_CLI_TRUST_UNKNOWN",
            format!("cannot read the agent CLIs' trust: {e}"),
            "repair the file it names (swarm trust refuses to rewrite a file it cannot parse)",
        )],
    }
}

/// Codex roles whose every sandboxed command will fail: CODEX_HOME in the
/// temp folder and a system bwrap on PATH (launch::agents::codex_sandbox).
pub fn codex_sandbox_helper(cx: &Context) -> Vec<Finding> {
    let Ok(plan) = &cx.plan else {
        return Vec::new();
    };
    codex_sandbox::problems(plan, |k| std::env::var_os(k))
        .into_iter()
        .map(|p| Finding::new("CODEX_SANDBOX_HELPER", p.message(), p.fix()).at(&p.codex_home))
        .collect()
}

/// Claude Code roles with `permission: full` in a swarm run as root, which
/// Claude Code refuses to start (launch::agents::claude_root).
pub fn claude_full_as_root(cx: &Context) -> Vec<Finding> {
    let Ok(plan) = &cx.plan else {
        return Vec::new();
    };
    use crate::launch::agents::claude_root;
    claude_root::problems(plan, claude_root::euid(), |k| std::env::var_os(k))
        .into_iter()
        .map(|p| Finding::new("CLAUDE_FULL_AS_ROOT", p.message(), p.fix()))
        .collect()
}

/// Confined Gemini CLI roles set to use Gemini's own container sandbox,
/// which `swarm up` refuses (launch::agents::gemini_sandbox).
pub fn gemini_sandbox_confined(cx: &Context) -> Vec<Finding> {
    let Ok(plan) = &cx.plan else {
        return Vec::new();
    };
    gemini_sandbox::problems(plan, |k| std::env::var_os(k))
        .into_iter()
        .map(|p| Finding::new("GEMINI_SANDBOX_CONFINED", p.message(), p.fix()))
        .collect()
}
