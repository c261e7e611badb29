//! The command line that starts a preset CLI as an ACP agent
//! (`runtime: acp`): JSON-RPC on its stdin and stdout, no terminal.
//!
//! Gemini CLI speaks the protocol itself: `gemini --acp` (0.61 reads
//! `--acp`; `--experimental-acp` is its deprecated spelling, read from its
//! `--help`). The approval mode, model and `args:` are the other runtimes'
//! (agents/gemini.rs), and `GEMINI_CLI_TRUST_WORKSPACE=true` trusts the
//! worktree for this run, as a headless turn does: a folder-trust dialog
//! has no screen here. Claude Code and Codex speak it through adapters
//! (`@zed-industries/claude-agent-acp`, `@zed-industries/codex-acp`) that
//! are not pinned or tested yet: a role asking for them is refused with
//! that said, never started half-working.

use crate::error::{Error, Result};
use crate::launch::agents::{gemini, Cli, Launch};

/// The shell command that starts `cli` as an ACP agent for `l`.
pub fn acp_command(cli: Cli, l: &Launch) -> Result<String> {
    match cli {
        Cli::Gemini => Ok(format!(
            "GEMINI_CLI_TRUST_WORKSPACE=true exec gemini --acp {}",
            gemini::common(l)
        )),
        other => Err(Error::bad_input(format!(
            "role '{}': `runtime: acp` runs Gemini CLI in this version; {} needs its ACP adapter, which is not supported yet\n  hint: use `runtime: headless` or `tmux` for it (docs/agents.md, \"The ACP runtime\")",
            l.role,
            other.name()
        ))),
    }
}
