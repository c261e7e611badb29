//! What each role's agent runs: the command line, the programs it needs and
//! the environment it starts in.

use std::ffi::OsString;
use std::path::Path;

use crate::error::{Error, Result};
use crate::launch::agents::{Cli, Launch};
use crate::launch::plan::{AgentSpec, Plan, PlannedRole};
use crate::launch::shims;
use crate::protocol::config::Config;
use crate::protocol::launch_files::{prompt_file, shim_dir};
use crate::protocol::layout::Project;
use crate::protocol::swarmforge_conf::error_prefix;

/// POSIX single-quoting.
use crate::sys::shell::{quote as sq, quote_path as sqp};

pub(super) fn wants_auto_approve(extra: &str) -> bool {
    extra.contains("--always-approve")
        || extra.contains("--yolo")
        || extra
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .any(|w| w == ["--permission-mode", "bypassPermissions"])
}

/// SwarmForge's instruction file for a model agent (docs/launcher.md).
pub fn prompt_text(role: &str) -> String {
    format!(
        "Read swarmforge/constitution.prompt, then read every file it refers to recursively, and obey all of those instructions.\n\
         Read swarmforge/roles/{role}.prompt, then read every file it refers to recursively, and follow all of those instructions.\n"
    )
}

/// Whether a preset's primer reaches it through a file rather than the
/// first prompt: always through Claude's system-prompt file; through
/// `AGENTS.md`/`GEMINI.md` only in a worktree of the role's own (roles
/// sharing the root would overwrite each other's) where git does not track
/// that file (a block of ours in a tracked file would be committed).
pub fn instructions_in_file(cli: Cli, r: &PlannedRole) -> bool {
    match cli.preset().instruction_file() {
        None => true,
        Some(name) => !r.in_root() && !tracked(&r.worktree_path, name),
    }
}

/// `name` is tracked by git in the worktree `wt`.
pub fn tracked(wt: &Path, name: &str) -> bool {
    // Pinned: the worktree is the agent's to write (sys::git::Pinned).
    wt.is_dir()
        && crate::sys::git::Pinned::find(wt)
            .and_then(|g| g.call(&["ls-files", "--error-unmatch", "--", name]))
            .is_ok_and(|r| r.ok)
}

/// The shell command line that runs a role's agent (None for a person).
/// Model agents get SwarmForge's start commands; anything else runs as
/// written. `config` is the swarm's loaded swarm.yaml (the plan's).
pub fn agent_command(project: &Project, config: &Config, r: &PlannedRole) -> Option<String> {
    match &r.agent {
        AgentSpec::Human => None,
        AgentSpec::Command(c) => Some(c.clone()),
        // Our own binary by absolute path; the key stays in the environment.
        // No `exec`: the tmux pane script runs this line inside its loop.
        AgentSpec::Api => Some(format!(
            "{} run-api --role {}",
            shims::own_bin_dir()
                .map(|d| sqp(&d.join("swarm")))
                .unwrap_or_else(|_| "swarm".into()),
            sq(&r.name)
        )),
        // A headless preset: each run is one turn read by our own binary;
        // an ACP preset: our own binary is the client of its one session.
        AgentSpec::Preset { headless, acp, .. } if *headless || *acp => Some(format!(
            "{} {} --role {}",
            shims::own_bin_dir()
                .map(|d| sqp(&d.join("swarm")))
                .unwrap_or_else(|_| "swarm".into()),
            if *acp { "acp" } else { "turn" },
            sq(&r.name)
        )),
        AgentSpec::Preset {
            cli,
            model,
            args,
            permission,
            ..
        } => Some(cli.preset().command(&Launch {
            role: &r.name,
            root: &project.root,
            worktree: &r.worktree_path,
            prompt_file: &prompt_file(project, &r.name),
            model: model.as_deref(),
            args,
            permission: *permission,
            instructions_in_file: instructions_in_file(*cli, r),
            mcp: config.role(&r.name).is_some_and(|x| x.mcp),
            confined: config.launch.confine,
        })),
        AgentSpec::Model { name, extra } => {
            let p = sqp(&prompt_file(project, &r.name));
            let wt = sqp(&r.worktree_path);
            let extra_s = extra.as_deref().unwrap_or("");
            let x = if extra_s.trim().is_empty() {
                String::new()
            } else {
                format!("{extra_s} ")
            };
            let perm = if wants_auto_approve(extra_s) {
                "--permission-mode bypassPermissions "
            } else {
                "--permission-mode acceptEdits "
            };
            let title = sq(&format!("SwarmForge {}", r.display));
            Some(match name.as_str() {
                "claude" => format!(
                    "claude --append-system-prompt-file {p} {perm}-n {title} {x}\"$(cat {p})\""
                ),
                "codex" => format!("codex -C {wt} {x}\"$(cat {p})\""),
                "copilot" => format!("copilot -C {wt} --name {title} {x}-i \"$(cat {p})\""),
                _ => format!(
                    "grok --cwd {wt} {perm}{x}--rules \"$(cat {p})\" --verbatim \"$(cat {p})\""
                ),
            })
        }
    }
}

/// Shell words that are not programs on PATH.
pub(super) const SHELL_WORDS: &[&str] = &[
    ".", ":", "exec", "cd", "set", "export", "env", "if", "for", "while", "case", "until", "{",
    "(", "!", "eval", "command", "true", "false", "test", "[", "echo", "printf", "read",
];

/// The program a command line starts, when it is a plain word we can check.
pub(super) fn program_word(cmd: &str) -> Option<&str> {
    let w = cmd.split_whitespace().next()?;
    let plain = w
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-' | b'+'));
    (plain && !SHELL_WORDS.contains(&w)).then_some(w)
}

/// A program the swarm needs that is not on PATH, and the roles using it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingProgram {
    pub program: String,
    /// Empty for tmux (the launcher's own need).
    pub roles: Vec<String>,
}

/// Every program the plan needs (tmux when `need_tmux`, then each agent's)
/// that is not installed, in plan order: all of them, so one install round
/// fixes them all.
pub fn missing_programs(plan: &Plan, need_tmux: bool) -> Vec<MissingProgram> {
    let mut words: Vec<MissingProgram> = Vec::new();
    if need_tmux {
        words.push(MissingProgram {
            program: "tmux".into(),
            roles: Vec::new(),
        });
    }
    for r in &plan.roles {
        let w = match &r.agent {
            AgentSpec::Human | AgentSpec::Api => continue,
            AgentSpec::Model { name, .. } => Some(name.as_str()),
            // `runtime: acp`: the adapter (or the CLI) the client starts.
            AgentSpec::Preset { cli, acp: true, .. } => {
                Some(crate::launch::acp::command::program(*cli))
            }
            AgentSpec::Preset { cli, .. } => Some(cli.name()),
            AgentSpec::Command(c) => program_word(c),
        };
        if let Some(w) = w {
            match words.iter_mut().find(|x| x.program == w) {
                Some(m) => m.roles.push(r.name.clone()),
                None => words.push(MissingProgram {
                    program: w.to_string(),
                    roles: vec![r.name.clone()],
                }),
            }
        }
    }
    words.retain(|m| !crate::protocol::swarmforge_conf::is_command(&m.program));
    words
}

/// The repair of one missing program.
pub fn missing_hint(plan: &Plan, m: &MissingProgram) -> String {
    if m.program == "tmux" {
        "install tmux, or run headless with `swarm up --no-tmux`".to_string()
    } else {
        format!(
            "install it (roles {}), or change their agent in {}",
            m.roles.join(", "),
            plan.source.path().display()
        )
    }
}

/// Every agent's program must be installed before anything starts; every
/// missing one is named at once.
pub(crate) fn check_programs(plan: &Plan, need_tmux: bool) -> Result<()> {
    let missing = missing_programs(plan, need_tmux);
    if missing.is_empty() {
        return Ok(());
    }
    let mut msg = String::new();
    for m in &missing {
        if !msg.is_empty() {
            msg.push('\n');
        }
        msg.push_str(&format!(
            "{}'{}' is required but not installed.\n  hint: {}",
            error_prefix(),
            m.program,
            missing_hint(plan, m)
        ));
    }
    Err(Error::env(msg))
}

/// PATH for agents: the wrappers, the folder of our binaries, then the
/// inherited PATH.
pub(super) fn agent_path(project: &Project) -> Result<OsString> {
    let mut dirs = vec![shim_dir(project), shims::own_bin_dir()?];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).map_err(|e| Error::internal(format!("cannot build PATH: {e}")))
}

/// The lines every agent script starts with: identity, PATH, worktree.
pub(super) fn env_prelude(project: &Project, config: &Config, r: &PlannedRole) -> Result<String> {
    let mut s = format!(
        "export SWARMFORGE_ROLE={}\nexport SWARMFORGE_PROJECT={}\nexport PATH={}:{}:\"$PATH\"\n",
        sq(&r.name),
        sqp(&project.root),
        sqp(&shim_dir(project)),
        sqp(&shims::own_bin_dir()?),
    );
    // The swarm's own turn-end hook runs in a preset's session (written
    // by agents::setup): a CLI plugin's copy of it stands aside.
    if let AgentSpec::Preset { cli, .. } = &r.agent {
        s.push_str(&format!(
            "export {}={}\n",
            crate::launch::agents::OWN_HOOK_ENV,
            cli.name()
        ));
    }
    for (k, v) in crate::launch::role_mcp::env(config, r) {
        s.push_str(&format!("export {k}={}\n", sqp(&v)));
    }
    // Other roles' secrets (launch::secrets): the tmux server has them all.
    // A person's own shell keeps what they gave it.
    if !r.is_human() {
        let foreign = crate::launch::secrets::foreign(config, &r.name);
        let names: Vec<String> = foreign.iter().map(|k| sq(k)).collect();
        s.push_str(&format!("unset {}\n", names.join(" ")));
    }
    s.push_str(&format!("cd {} || exit 1\n", sqp(r.workdir())));
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn role(agent: AgentSpec) -> PlannedRole {
        PlannedRole {
            name: "code-reviewer".into(),
            worktree_name: "cr".into(),
            worktree_path: PathBuf::from("/p/.worktrees/cr"),
            session: "swarmforge-code-reviewer".into(),
            display: "Code Reviewer".into(),
            mode: crate::protocol::roles::ReceiveMode::Task,
            agent,
        }
    }

    #[test]
    fn model_commands_follow_swarmforge() {
        let p = Project::new("/p");
        let m = |name: &str, extra: Option<&str>| {
            agent_command(
                &p,
                &Config::default(),
                &role(AgentSpec::Model {
                    name: name.into(),
                    extra: extra.map(str::to_string),
                }),
            )
            .unwrap()
        };
        let pf = "'/p/.swarmforge/prompts/code-reviewer.md'";
        assert_eq!(
            m("claude", None),
            format!("claude --append-system-prompt-file {pf} --permission-mode acceptEdits -n 'SwarmForge Code Reviewer' \"$(cat {pf})\"")
        );
        assert_eq!(
            m("claude", Some("--yolo")),
            format!("claude --append-system-prompt-file {pf} --permission-mode bypassPermissions -n 'SwarmForge Code Reviewer' --yolo \"$(cat {pf})\"")
        );
        assert_eq!(
            m("codex", Some("-m o3")),
            format!("codex -C '/p/.worktrees/cr' -m o3 \"$(cat {pf})\"")
        );
        assert_eq!(
            m("copilot", None),
            format!("copilot -C '/p/.worktrees/cr' --name 'SwarmForge Code Reviewer' -i \"$(cat {pf})\"")
        );
        assert_eq!(
            m("grok", None),
            format!("grok --cwd '/p/.worktrees/cr' --permission-mode acceptEdits --rules \"$(cat {pf})\" --verbatim \"$(cat {pf})\"")
        );
        assert_eq!(
            agent_command(&p, &Config::default(), &role(AgentSpec::Human)),
            None
        );
    }

    #[test]
    fn a_presets_session_says_the_swarms_own_hook_runs_there() {
        let p = Project::new("/p");
        let preset = role(AgentSpec::Preset {
            cli: crate::launch::agents::Cli::Codex,
            model: None,
            args: Vec::new(),
            permission: Default::default(),
            headless: false,
            acp: false,
        });
        let s = env_prelude(&p, &Config::default(), &preset).unwrap();
        assert!(s.contains("export SWARMFORGE_TURN_HOOK=codex\n"), "{s}");
        let s = env_prelude(&p, &Config::default(), &role(AgentSpec::Human)).unwrap();
        assert!(!s.contains("SWARMFORGE_TURN_HOOK"), "{s}");
    }

    #[test]
    fn an_api_role_runs_our_runner_inside_the_pane_loop() {
        let c = agent_command(
            &Project::new("/p"),
            &Config::default(),
            &role(AgentSpec::Api),
        )
        .unwrap();
        assert!(c.ends_with("swarm' run-api --role 'code-reviewer'"), "{c}");
        // The tmux pane script inlines the command in its loop: an `exec`
        // would end the loop after the first run.
        assert!(!c.starts_with("exec "), "{c}");
    }

    #[test]
    fn program_words() {
        assert_eq!(program_word("sh agents/x.sh"), Some("sh"));
        assert_eq!(program_word("./x.sh"), None);
        assert_eq!(program_word("FOO=1 x"), None);
        assert_eq!(program_word("exec x"), None);
        assert_eq!(program_word("\"$X\"/a"), None);
    }
}
