//! The checks of `swarm doctor`, one function each (see [`super::CHECKS`]).
//! Codes are stable: scripts match on them (docs/doctor.md lists them).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Context, Finding};
use crate::launch::command::{missing_hint, missing_programs};
use crate::protocol::clock;
use crate::protocol::layout::Worktree;
use crate::protocol::people;
use crate::protocol::swarmforge_conf::is_command;
use crate::protocol::trail::{self, Scope, Trail};

/// Stamps this far apart (sender's clock vs. the daemon's) count as skew.
const SKEW_SECS: i64 = 2;
/// A stamp this far in the future is a clock that is ahead.
const FUTURE_SECS: i64 = 60;
/// Free space below this (bytes) on the project's file system.
const MIN_FREE_BYTES: u64 = 100 * 1024 * 1024;
/// Most audit violations listed one by one (the rest are counted).
const MAX_LISTED: usize = 20;

fn absolute(cx: &Context, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cx.project.root.join(p)
    }
}

/// `swarm init` has run here: without `.swarmforge/roles.tsv` there is no
/// swarm yet (the other checks still look at what needs no project).
pub fn project(cx: &Context) -> Vec<Finding> {
    if cx.initialised {
        return Vec::new();
    }
    let root = cx.project.root.display();
    let from = if cx.project.config_file().exists() || cx.project.swarmforge_conf().exists() {
        "its roles are read from swarm.yaml (or swarmforge/swarmforge.conf)".to_string()
    } else {
        "write a swarm.yaml with a `roles:` list first, or start from an example: `swarm init --example pipeline`".to_string()
    };
    vec![Finding::new(
        "NOT_INITIALISED",
        format!("no swarm at {root}: no .swarmforge/roles.tsv (`swarm init` has not run here)"),
        format!("run `swarm init {root}` (or `swarm up`, which initialises); {from}; or name another project with --root DIR"),
    )
    .at(cx.project.roles_tsv())]
}

/// Hints of an error's text (`  hint: …` lines), joined.
fn hints(text: &str) -> String {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("hint:"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("; ")
}

/// `line N column M: rest` (the YAML parser's words) as `(N, M, rest)`.
fn line_col(why: &str) -> Option<(u64, u64, &str)> {
    let rest = why.trim_start_matches("error: ").strip_prefix("line ")?;
    let (line, rest) = rest.split_once(" column ")?;
    let (col, rest) = rest.split_once(": ")?;
    Some((line.parse().ok()?, col.parse().ok()?, rest))
}

/// A load error as one finding's message (`file:line:col: what`, when the
/// parser says where) and fix (its hints).
fn load_error(e: &crate::Error) -> (String, String) {
    let (message, hint) = match e {
        crate::Error::BadFile { path, why, hint } => {
            let first = why.lines().next().unwrap_or("").trim();
            let message = match line_col(first) {
                Some((l, c, rest)) => format!("{}:{l}:{c}: {rest}", path.display()),
                None => format!(
                    "{}: {}",
                    path.display(),
                    first.trim_start_matches("error: ")
                ),
            };
            (message, hint.clone().unwrap_or_default())
        }
        other => {
            let text = other.to_string();
            (text.lines().next().unwrap_or("").to_string(), hints(&text))
        }
    };
    (message, hint)
}

/// How to repair a file named in a CONFIG_INVALID finding: its hints.
fn repair(hint: String) -> String {
    let then = "`swarm up` refuses to start until it loads";
    if hint.is_empty() {
        format!("repair the file at the place named; {then}")
    } else {
        format!("{hint}; {then}")
    }
}

/// `swarm.yaml` / `swarmforge.conf` and `roles.tsv` must load: each file
/// that does not is one finding, at the line and column the parser names.
pub fn config(cx: &Context) -> Vec<Finding> {
    let mut out = Vec::new();
    let tsv = cx.project.roles_tsv();
    if let Some(e) = &cx.roles_error {
        let (message, hint) = load_error(e);
        out.push(
            Finding::new(
                "CONFIG_INVALID",
                message,
                // Not `repair`: `swarm up` initialises, which writes it again.
                [
                    hint.as_str(),
                    "`swarm init` writes it again from swarm.yaml",
                ]
                .iter()
                .filter(|h| !h.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("; "),
            )
            .at(&tsv),
        );
    } else if let Some(first) = cx.roles.problems.first() {
        // `line N: what` from the table's parser, as `file:N: what`.
        let what = first
            .strip_prefix("line ")
            .and_then(|r| r.split_once(": "))
            .map(|(n, rest)| format!("{}:{n}: {rest}", tsv.display()))
            .unwrap_or_else(|| format!("{}: {first}", tsv.display()));
        let more = match cx.roles.problems.len() {
            1 => String::new(),
            n => format!(" (and {} more line(s))", n - 1),
        };
        out.push(
            Finding::new(
                "CONFIG_INVALID",
                format!("{what}; that line is skipped, so its role gets no mail{more}"),
                "repair the line (seven TAB-separated columns; docs/protocol.md), or run `swarm init`, which writes the table again from swarm.yaml",
            )
            .at(&tsv),
        );
    }
    let has_config = cx.project.config_file().exists() || cx.project.swarmforge_conf().exists();
    let at = if cx.project.config_file().exists() {
        cx.project.config_file()
    } else {
        cx.project.swarmforge_conf()
    };
    if let Some(e) = &cx.config_error {
        // The plan failed on the same error: reported once.
        let (message, hint) = load_error(e);
        out.push(Finding::new("CONFIG_INVALID", message, repair(hint)).at(at));
    } else if let Err(e) = &cx.plan {
        if has_config {
            out.push(
                Finding::new(
                    "CONFIG_INVALID",
                    e.lines().next().unwrap_or(e).to_string(),
                    repair(hints(e)),
                )
                .at(at),
            );
        }
    }
    out
}

/// A SwarmForge project's `swarmforge.conf` lines that are read but not
/// acted on here (protocol::swarmforge_conf, docs/swarmforge-compat.md): the
/// migration check. Nothing SwarmForge accepts is refused; this says what
/// would behave differently.
pub fn swarmforge_features(cx: &Context) -> Vec<Finding> {
    let Ok(plan) = &cx.plan else {
        return Vec::new();
    };
    if !matches!(plan.source, crate::launch::plan::Source::SwarmforgeConf(_)) {
        return Vec::new();
    }
    let paths = crate::protocol::swarmforge_conf::ConfPaths::for_root(&cx.project.root);
    let Ok(conf) = crate::protocol::swarmforge_conf::load(&paths) else {
        return Vec::new();
    };
    conf.notes
        .into_iter()
        .map(|n| {
            Finding::new(
                "SWARMFORGE_NOT_SUPPORTED",
                n,
                "see docs/swarmforge-compat.md for what this project does instead; remove the line to silence this",
            )
            .at(&paths.config)
        })
        .collect()
}

/// A human role sharing its worktree (its inbox) with an agent.
pub fn shared_inbox(cx: &Context) -> Vec<Finding> {
    people::shared_inboxes(&cx.roles)
        .iter()
        .map(|s| {
            Finding::new(
                "SHARED_INBOX",
                s.what(),
                s.tsv_hint(&cx.project)
                    .lines()
                    .map(|l| l.trim().trim_start_matches("hint: "))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
            .at(cx.project.roles_tsv())
        })
        .collect()
}

/// Items for a person waiting in an inbox that is not theirs (left from a
/// layout where the person shared an agent's inbox).
pub fn person_mail_elsewhere(cx: &Context) -> Vec<Finding> {
    if !cx.initialised {
        return Vec::new();
    }
    let mut out = Vec::new();
    let local: Vec<_> = cx.roles.roles.iter().filter(|r| !r.is_remote()).collect();
    for h in local.iter().filter(|r| r.is_human()) {
        let own = absolute(cx, &h.worktree_path);
        let mut seen: Vec<PathBuf> = Vec::new();
        for r in &local {
            let wt = absolute(cx, &r.worktree_path);
            if wt == own || seen.contains(&wt) {
                continue;
            }
            seen.push(wt.clone());
            let there: Vec<&str> = local
                .iter()
                .filter(|o| absolute(cx, &o.worktree_path) == wt)
                .map(|o| o.name.as_str())
                .collect();
            let new = Worktree::new(&wt).inbox_new();
            for name in trail::handoff_names(&new).unwrap_or_default() {
                let path = new.join(&name);
                let trail::Loaded::Ok(m) = trail::load_message(
                    &path,
                    cx.config.limits.max_file_bytes + crate::agent::queue::STAMP_HEADROOM,
                ) else {
                    continue;
                };
                let for_person = m.recipient() == Some(h.name.as_str())
                    || (people::meant_for(&m, &h.name)
                        && !there.iter().any(|o| people::meant_for(&m, o)));
                if for_person {
                    out.push(
                        Finding::new(
                            "PERSON_MAIL_ELSEWHERE",
                            format!(
                                "{} waits for {} in {}, which is not {}'s inbox",
                                m.id().unwrap_or(&name),
                                h.name,
                                new.display(),
                                h.name
                            ),
                            format!(
                                "move it into {}/ (mv {} {}/)",
                                Worktree::new(&own).inbox_new().display(),
                                path.display(),
                                Worktree::new(&own).inbox_new().display()
                            ),
                        )
                        .at(path),
                    );
                }
            }
        }
    }
    out
}

/// Whether git ignores `rel` in the checkout `wt` (None: not a git
/// checkout, or one whose git pointers cannot be believed). Pinned: the
/// checkout may be an agent's (sys::git::Pinned).
fn git_ignores(wt: &Path, rel: &str) -> Option<bool> {
    let r = crate::sys::git::Pinned::find(wt)
        .ok()?
        .call(&["check-ignore", "-q", "--", rel])
        .ok()?;
    match (r.ok, r.stderr.trim().is_empty()) {
        (true, _) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

fn git_tracks(wt: &Path, rel: &str) -> bool {
    crate::sys::git::Pinned::find(wt)
        .and_then(|g| g.call(&["ls-files", "--error-unmatch", "--", rel]))
        .is_ok_and(|r| r.ok)
}

/// Files the launcher wrote into a checkout that git neither ignores nor
/// tracks: one `git add -A` would commit the swarm's state or settings.
pub fn launch_files_ignored(cx: &Context) -> Vec<Finding> {
    let mut candidates: Vec<(PathBuf, String)> =
        vec![(cx.project.root.clone(), ".worktrees/".into())];
    for r in cx.roles.roles.iter().filter(|r| !r.is_remote()) {
        if people::is_person_folder(&r.worktree_name) {
            continue;
        }
        let wt = absolute(cx, &r.worktree_path);
        let mut names = vec![".swarmforge/".to_string()];
        if let Some(cli) = crate::launch::agents::Cli::from_agent(&r.agent) {
            let p = cli.preset();
            names.extend(p.instruction_file().map(str::to_string));
            names.push(p.hook_file().to_string());
            names.push(".mcp.json".into());
        }
        for n in names {
            if !candidates.iter().any(|(w, x)| *w == wt && *x == n) {
                candidates.push((wt.clone(), n));
            }
        }
    }
    candidates
        .into_iter()
        .filter(|(wt, rel)| wt.join(rel.trim_end_matches('/')).exists())
        .filter(|(wt, rel)| git_ignores(wt, rel) == Some(false) && !git_tracks(wt, rel))
        .map(|(wt, rel)| {
            Finding::new(
                "UNIGNORED_LAUNCH_FILE",
                format!(
                    "{} was written by swarm, but git neither ignores nor tracks it in {}",
                    rel,
                    wt.display()
                ),
                format!(
                    "add `{rel}` to the repository's info/exclude (git rev-parse --git-path info/exclude); `swarm init` adds .swarmforge/ and .worktrees/"
                ),
            )
            .at(wt.join(rel.trim_end_matches('/')))
        })
        .collect()
}

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
    let names: Vec<&str> = crate::launch::agents::ALL
        .iter()
        .map(|c| c.name())
        .collect();
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
    if !plan
        .roles
        .iter()
        .any(|r| crate::launch::trust::cli_of(r).is_some())
    {
        return Vec::new();
    }
    let stores = match crate::launch::trust::Stores::from(|k| std::env::var_os(k)) {
        Ok(s) => s,
        Err(e) => {
            return vec![Finding::new(
                "AGENT_CLI_TRUST_UNKNOWN",
                format!("cannot tell which worktrees the agent CLIs trust: {e}"),
                "set HOME to the home folder the agent CLIs use",
            )]
        }
    };
    let bypass = crate::launch::trust::unconsented(plan, &stores).into_iter().map(|b| {
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
    let api_key = crate::launch::trust::unanswered_api_key(plan, &stores).map(|k| {
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
    match crate::launch::trust::untrusted(plan, &stores) {
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
    crate::launch::agents::codex_sandbox::problems(plan, |k| std::env::var_os(k))
        .into_iter()
        .map(|p| Finding::new("CODEX_SANDBOX_HELPER", p.message(), p.fix()).at(&p.codex_home))
        .collect()
}

/// A confined agent's worktree not pinned (launch::role_branch): its agent
/// cannot commit (the sandbox keeps `.git/refs` read-only), or its
/// worktree ref points at another branch.
pub fn role_branch(cx: &Context) -> Vec<Finding> {
    let Ok(plan) = &cx.plan else {
        return Vec::new();
    };
    if !crate::launch::confine::enabled(plan) {
        return Vec::new();
    }
    plan.roles
        .iter()
        .filter(|r| r.has_own_checkout() && !r.is_human() && r.worktree_path.join(".git").exists())
        .filter_map(|r| {
            let why = crate::launch::role_branch::unpinned(&plan.project.root, &r.worktree_path)?;
            Some(
                Finding::new(
                    "ROLE_BRANCH",
                    format!(
                        "role {} runs confined, but {why} in its worktree {}, not on {} (its branch {}): its agent cannot commit there, or a write through its branch would move another",
                        r.name,
                        r.worktree_path.display(),
                        crate::launch::role_branch::WORKTREE_REF,
                        crate::launch::role_branch::branch_name(&r.worktree_name)
                    ),
                    "run `swarm up` (or `swarm init`), which pins it or says what to repair first (docs/security.md, \"Branches\")",
                )
                .at(&r.worktree_path),
            )
        })
        .collect()
}

/// The role byline's commit-msg hook (agent::byline): installed as this
/// `swarm` would write it, or not.
pub fn commit_msg_hook(cx: &Context) -> Vec<Finding> {
    if !cx.initialised {
        return Vec::new();
    }
    use crate::agent::byline::{self, State, SAVED};
    let swarm = match crate::launch::shims::own_bin_dir() {
        Ok(d) => d.join("swarm"),
        Err(e) => return vec![Finding::new("COMMIT_MSG_HOOK", e.to_string(), "")],
    };
    let state = match byline::state(&cx.project.root, &swarm) {
        Ok(s) => s,
        Err(e) => {
            return vec![Finding::new(
                "COMMIT_MSG_HOOK",
                format!("cannot tell where git's hooks are: {e}"),
                "run `swarm init`, which makes the repository",
            )]
        }
    };
    let install = "run `swarm up` or `swarm hooks install` (docs/swarmforge-compat.md §8)";
    let (message, fix, at) = match state {
        State::Installed { .. } => return Vec::new(),
        State::Missing { hook } => (
            format!("the commit-msg byline hook is not installed ({}): role commits get no `By <role>.`", hook.display()),
            install.to_string(),
            hook,
        ),
        State::Stale { hook } => (
            format!("the commit-msg byline hook {} is not the one this swarm writes (another `swarm` binary, or SwarmForge's own)", hook.display()),
            install.to_string(),
            hook,
        ),
        State::Foreign { hook } => (
            format!("{} is a commit-msg hook of the project's own: `swarm up` will keep it as {SAVED} and run it after the byline hook", hook.display()),
            format!("{install}; or `swarm hooks remove` later to put it back"),
            hook,
        ),
        State::Blocked { hook, saved } => (
            format!("{} is a commit-msg hook of the project's own and {} exists too: the byline hook cannot be installed without overwriting one", hook.display(), saved.display()),
            "merge the two into one (or remove the one no longer wanted), then run `swarm up`".to_string(),
            hook,
        ),
    };
    vec![Finding::new("COMMIT_MSG_HOOK", message, fix).at(at)]
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
    crate::launch::agents::gemini_sandbox::problems(plan, |k| std::env::var_os(k))
        .into_iter()
        .map(|p| Finding::new("GEMINI_SANDBOX_CONFINED", p.message(), p.fix()))
        .collect()
}

/// The `handoffd` processes serving this project (by their command line).
fn daemons_for(root: &Path) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let want = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            let is_daemon = args.first().is_some_and(|a| {
                Path::new(std::ffi::OsStr::from_bytes(a)).file_name()
                    == Some(std::ffi::OsStr::new("handoffd"))
            });
            is_daemon
                && !args.iter().any(|a| *a == b"--once")
                && args.iter().skip(1).any(|a| {
                    Path::new(std::ffi::OsStr::from_bytes(a))
                        .canonicalize()
                        .is_ok_and(|p| p == want)
                })
        })
        .collect()
}

use std::os::unix::ffi::OsStrExt;

/// The daemon: running, only one, and the same build as this CLI.
pub fn daemon(cx: &Context) -> Vec<Finding> {
    if !cx.initialised {
        return Vec::new();
    }
    let root = &cx.project.root;
    let Some(pid) = crate::daemon::control::running_pid(&cx.project) else {
        return vec![Finding::new(
            "DAEMON_NOT_RUNNING",
            format!(
                "no handoffd delivers for {}: messages stay in outboxes",
                root.display()
            ),
            format!("run `swarm up`, or `handoffd {} &`", root.display()),
        )
        .at(cx.project.pid_file())];
    };
    let mut out = Vec::new();
    let all = daemons_for(root);
    if all.len() > 1 {
        out.push(Finding::new(
            "DAEMON_MULTIPLE",
            format!(
                "{} handoffd processes name {} (pids {})",
                all.len(),
                root.display(),
                all.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ),
            format!("keep the one holding the pid file lock (pid {pid}); stop the others with kill <pid>"),
        ));
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"));
    match exe {
        Ok(p) if p.to_string_lossy().ends_with(" (deleted)") => out.push(Finding::new(
            "DAEMON_STALE_BINARY",
            format!(
                "handoffd (pid {pid}) runs a binary that was replaced or deleted since it started: {}",
                p.display()
            ),
            format!("restart it: `swarm stop {r}` then `swarm up` (or `handoffd {r} &`)", r = root.display()),
        )),
        Ok(p) => {
            let v = Command::new(&p)
                .arg("--version")
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
            let mine = env!("CARGO_PKG_VERSION");
            if let Some(v) = v.filter(|v| v.split_whitespace().last() != Some(mine)) {
                out.push(Finding::new(
                    "DAEMON_VERSION",
                    format!(
                        "handoffd (pid {pid}, {}) reports '{}', this swarm is {mine}",
                        p.display(),
                        crate::text::escape(&v)
                    ),
                    format!("restart it with this build: `swarm stop {r}` then `swarm up`", r = root.display()),
                ));
            }
        }
        // Another user's process: nothing more to learn.
        Err(_) => {}
    }
    out
}

/// Logs that grow past twice their rotation size are not being rotated.
pub fn logs(cx: &Context) -> Vec<Finding> {
    if !cx.initialised {
        return Vec::new();
    }
    let limit = cx.config.logs.max_bytes;
    if limit == 0 {
        return Vec::new();
    }
    let p = &cx.project;
    let mut files = vec![p.log_file(), p.events_file(), p.daemon_output()];
    files.extend(
        crate::protocol::launch_files::agent_files(p, "log")
            .into_iter()
            .map(|(_, f)| f),
    );
    files
        .into_iter()
        .filter_map(|f| {
            let len = std::fs::metadata(&f).ok()?.len();
            (len > limit.saturating_mul(2)).then(|| {
                Finding::new(
                    "LOG_TOO_LARGE",
                    format!(
                        "{} holds {len} bytes, more than twice logs.max_bytes ({limit})",
                        f.display()
                    ),
                    "move it away or truncate it when no swarm runs; handoffd rotates its own logs, agent logs grow with what the agents print",
                )
                .at(f)
            })
        })
        .collect()
}

/// Room left on the project's file system (a full disk fails every send).
pub fn disk_space(cx: &Context) -> Vec<Finding> {
    let Ok(st) = rustix::fs::statvfs(&cx.project.root) else {
        return Vec::new();
    };
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    let total = st.f_blocks.saturating_mul(st.f_frsize);
    if free >= MIN_FREE_BYTES || total == 0 {
        return Vec::new();
    }
    vec![Finding::new(
        "DISK_LOW",
        format!(
            "only {} MiB free of {} MiB on the file system of {}",
            free / (1024 * 1024),
            total / (1024 * 1024),
            cx.project.root.display()
        ),
        "free space (e.g. `swarm archive`, old agent logs); a full disk refuses every send and delivery",
    )]
}

/// Stamps that disagree: a copy enqueued before it was created (the
/// sender's clock is ahead of the daemon's), or stamps in the future.
pub fn clock_skew(cx: &Context) -> Vec<Finding> {
    if !cx.initialised {
        return Vec::new();
    }
    let Ok(t) = Trail::load(&cx.project, &Scope::all()) else {
        return Vec::new();
    };
    let now = clock::now();
    let mut worst: Option<(i64, PathBuf)> = None;
    let mut future: Option<(i64, PathBuf)> = None;
    let mut count = 0usize;
    for c in &t.copies {
        if let (Some(cr), Some(en)) = (c.created.at(), c.enqueued.at()) {
            let ahead = (cr - en).num_seconds();
            if ahead > SKEW_SECS {
                count += 1;
                if worst.as_ref().is_none_or(|(w, _)| ahead > *w) {
                    worst = Some((ahead, c.path.clone()));
                }
            }
        }
    }
    for o in &t.originals {
        if let Some(at) = o.when() {
            let ahead = (at - now).num_seconds();
            if ahead > FUTURE_SECS && future.as_ref().is_none_or(|(w, _)| ahead > *w) {
                future = Some((ahead, o.path.clone()));
            }
        }
    }
    let mut out = Vec::new();
    if let Some((s, path)) = worst {
        out.push(
            Finding::new(
                "CLOCK_SKEW",
                format!("{count} cop(ies) were enqueued before they were created, by up to {s} s: a sender's clock runs ahead of the daemon's"),
                "synchronise the clocks (NTP: timedatectl set-ntp true) of every host and container that sends",
            )
            .at(path),
        );
    }
    if let Some((s, path)) = future {
        out.push(
            Finding::new(
                "CLOCK_SKEW",
                format!("a message is stamped {s} s in the future"),
                "synchronise the clocks (NTP) of every host and container that sends",
            )
            .at(path),
        );
    }
    out
}

/// What `swarm audit --check` finds.
pub fn audit(cx: &Context) -> Vec<Finding> {
    // The trail is read with the config and the role table: a broken one
    // is the `config` check's finding, not an unreadable trail.
    if !cx.initialised || cx.config_error.is_some() || cx.roles_error.is_some() {
        return Vec::new();
    }
    let lag = crate::views::audit::lag::Lag::before_load(&cx.project);
    let t = match Trail::load(&cx.project, &Scope::all()) {
        Ok(t) => t,
        Err(e) => {
            return vec![Finding::new(
                "AUDIT_UNREADABLE",
                e.to_string(),
                "repair what the message names, then run `swarm audit --check`",
            )]
        }
    };
    let v = crate::views::audit::check::verify(&t, lag).violations;
    let mut out: Vec<Finding> = v
        .iter()
        .take(MAX_LISTED)
        .map(|x| {
            Finding::new(
                "AUDIT_VIOLATION",
                format!("{} {}: {}", x.kind, x.subject, x.detail),
                "see `swarm audit --check` and docs/transcript-and-audit.md for what each violation means",
            )
        })
        .collect();
    if v.len() > MAX_LISTED {
        out.push(Finding::new(
            "AUDIT_VIOLATION",
            format!("… and {} more violation(s)", v.len() - MAX_LISTED),
            "run `swarm audit --check` for the whole list",
        ));
    }
    out
}
