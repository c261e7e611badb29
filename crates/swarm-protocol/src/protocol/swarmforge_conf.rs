//! SwarmForge's launcher config, `swarmforge/swarmforge.conf`
//! (docs/launcher.md): the grammar and the error texts of the original, byte
//! for byte, plus two extensions that are errors in the original:
//!
//! * role names must also satisfy docs/protocol.md §4
//!   (`[A-Za-z0-9][A-Za-z0-9-]*`);
//! * the agent column may be `human` (a person works the role; never woken),
//!   or any command: a word containing `/` (a path, resolved from the role's
//!   worktree) or a program found on `PATH`. The command line run is the agent
//!   word followed by the extra arguments. `claude`, `codex`, `copilot` and
//!   `grok` (any case) keep SwarmForge's start commands (see `launch`).
//!
//! Today's SwarmForge adds line forms (docs/swarmforge-compat.md §4), all
//! accepted here so that a project from it starts: `window-invisible` (a
//! window with no terminal, which every role here is), a propagation token
//! after the mode (`forward-only`, `back-one`, `back-all`), `card <type>
//! <role>...` (a task type's route, checked as upstream checks it) and
//! `Lieutenant <agent> [args...]` (a forge host's agent). Cards and
//! propagation are acted on by the board (crates/swarm-records/src/board/); what is read but not
//! acted on is listed in [`Conf::notes`], which `swarm up` prints and `swarm
//! doctor` reports.
//!
//! Role prompts (`swarmforge/roles/<role>.prompt`) are required only for the
//! four model agents: a script or a person does not read them. The
//! constitution is required as in the original (it marks a SwarmForge project).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::protocol::grammar;
use crate::protocol::roles::ReceiveMode;

/// SwarmForge's error prefix: red `Error:`, reset, space; plain `Error: `
/// when stderr is not a terminal or `NO_COLOR` is set.
pub fn error_prefix() -> &'static str {
    if crate::text::colour_stderr() {
        "\x1b[0;31mError:\x1b[0m "
    } else {
        "Error: "
    }
}

/// The agents SwarmForge knows how to start (after lower-casing).
pub const MODEL_AGENTS: [&str; 4] = ["claude", "codex", "copilot", "grok"];

/// What runs a role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfAgent {
    /// One of [`MODEL_AGENTS`], lower-cased.
    Model(String),
    /// A person.
    Human,
    /// A command word as written (case kept), run with the extra arguments.
    Command(String),
}

/// One `window` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfRole {
    pub line: usize,
    pub name: String,
    pub agent: ConfAgent,
    /// `master`, `none` or a directory name under `.worktrees/`.
    pub worktree: String,
    pub mode: ReceiveMode,
    /// Extra CLI arguments, re-joined with single spaces.
    pub extra: Option<String>,
    /// `window-invisible`: no terminal window (true of every role here).
    pub invisible: bool,
    pub propagation: Propagation,
}

pub use crate::protocol::config::Propagation;

/// A `card <type> <role>...` line: a task type and its ordered route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Card {
    pub line: usize,
    pub kind: String,
    pub route: Vec<String>,
}

/// A whole conf: the windows, the cards, the forge host's agent, and what
/// was accepted but is not acted on here.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Conf {
    pub roles: Vec<ConfRole>,
    pub cards: Vec<Card>,
    /// `Lieutenant <agent> [args...]`: (line, agent, extra args).
    pub lieutenant: Option<(usize, String, Option<String>)>,
    /// One line per accepted feature this project does not implement.
    pub notes: Vec<String>,
}

/// The files a conf parse looks at.
pub struct ConfPaths {
    pub config: PathBuf,
    pub constitution: PathBuf,
    pub roles_dir: PathBuf,
}

impl ConfPaths {
    pub fn for_root(root: &Path) -> ConfPaths {
        let sf = root.join("swarmforge");
        ConfPaths {
            config: sf.join("swarmforge.conf"),
            constitution: sf.join("constitution.prompt"),
            roles_dir: sf.join("roles"),
        }
    }
}

fn fail(msg: String) -> Error {
    Error::env(format!("{}{msg}", error_prefix()))
}

/// Java's `\s`: the separators `str/split line #"\s+"` splits on.
fn java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// Whether `word` names a runnable command: a path (contains `/`) or an
/// executable file in one of `PATH`'s directories.
pub fn is_command(word: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    if word.contains('/') {
        return true;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| {
        std::fs::metadata(d.join(word))
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}

/// Reads and checks the conf in SwarmForge's order: config present,
/// constitution present, each line, at least one window.
pub fn load(paths: &ConfPaths) -> Result<Conf> {
    if !paths.config.exists() {
        return Err(fail(format!(
            "Config not found at {}",
            paths.config.display()
        )));
    }
    if !paths.constitution.exists() {
        return Err(fail(format!(
            "Constitution prompt not found at {}",
            paths.constitution.display()
        )));
    }
    let bytes = crate::fsx::read_bounded(&paths.config, crate::protocol::config::MAX_CONFIG_BYTES)
        .map_err(|e| Error::bad_file(&paths.config, e))?;
    let text = String::from_utf8_lossy(&bytes);
    parse(&text, paths, &is_command, &|p: &Path| p.exists())
}

/// Parses `text` (the content of `paths.config`). `is_command` decides
/// whether a non-model, non-human agent word can run; `exists` checks prompts.
pub fn parse(
    text: &str,
    paths: &ConfPaths,
    is_command: &dyn Fn(&str) -> bool,
    exists: &dyn Fn(&Path) -> bool,
) -> Result<Conf> {
    let conf = paths.config.display();
    let mut rows: Vec<ConfRole> = Vec::new();
    let mut out = Conf::default();
    // Clojure's split-lines: `\n` or `\r\n`.
    for (i, raw) in text.split('\n').enumerate() {
        let line_no = i + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split(java_space).filter(|f| !f.is_empty()).collect();
        if directive(&mut out, &fields, line_no, line)? {
            continue;
        }
        let row = window(&fields, line_no, line)?;
        check_window(&row, &rows, &conf.to_string())?;
        let agent = agent_of(&row, fields[2], is_command)?;
        if matches!(agent, ConfAgent::Model(_)) {
            let prompt = paths.roles_dir.join(format!("{}.prompt", row.name));
            if !exists(&prompt) {
                return Err(fail(format!("Missing role prompt {}", prompt.display())));
            }
        }
        rows.push(ConfRole { agent, ..row });
    }
    if rows.is_empty() {
        return Err(fail(format!("No windows defined in {conf}")));
    }
    for card in &out.cards {
        check_route(card, &rows)?;
    }
    out.notes = notes(&out, &paths.config);
    out.roles = rows;
    Ok(out)
}

/// A `card` or `Lieutenant` line, kept in `out`; false for any other line.
fn directive(out: &mut Conf, fields: &[&str], line_no: usize, line: &str) -> Result<bool> {
    match fields[0] {
        "card" => {
            if fields.len() < 3 {
                return Err(fail(format!("Invalid config line {line_no}: {line}")));
            }
            out.cards.push(Card {
                line: line_no,
                kind: fields[1].to_string(),
                route: fields[2..].iter().map(|r| r.to_string()).collect(),
            });
            Ok(true)
        }
        "Lieutenant" => {
            if fields.len() < 2 || out.lieutenant.is_some() {
                return Err(fail(format!("Invalid config line {line_no}: {line}")));
            }
            let extra = (fields.len() > 2).then(|| fields[2..].join(" "));
            out.lieutenant = Some((line_no, fields[1].to_string(), extra));
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// A `window` (or `window-invisible`) line's fields as written: role,
/// worktree, receive mode, propagation and extra words (its agent not
/// checked yet: [`agent_of`]).
fn window(fields: &[&str], line_no: usize, line: &str) -> Result<ConfRole> {
    if fields.len() < 4 {
        return Err(fail(format!("Invalid config line {line_no}: {line}")));
    }
    let (keyword, role, worktree) = (fields[0], fields[1], fields[3]);
    let trailing = &fields[4..];
    let (mode, rest) = match trailing.first() {
        Some(&"task") => (ReceiveMode::Task, &trailing[1..]),
        Some(&"batch") => (ReceiveMode::Batch, &trailing[1..]),
        _ => (ReceiveMode::Task, trailing),
    };
    let (propagation, extra_tokens) = match rest.first().and_then(|w| Propagation::parse(w)) {
        Some(p) => (p, &rest[1..]),
        None => (Propagation::ForwardOnly, rest),
    };
    let extra = (!extra_tokens.is_empty()).then(|| extra_tokens.join(" "));
    if keyword != "window" && keyword != "window-invisible" {
        return Err(fail(format!(
            "Unknown config directive on line {line_no}: {keyword}"
        )));
    }
    Ok(ConfRole {
        line: line_no,
        name: role.to_string(),
        agent: ConfAgent::Human,
        worktree: worktree.to_string(),
        mode,
        extra,
        invisible: keyword == "window-invisible",
        propagation,
    })
}

/// Upstream's checks of a window's role and worktree, in its order: the
/// role's name, a role or worktree named twice, a worktree that is a path.
fn check_window(row: &ConfRole, rows: &[ConfRole], conf: &str) -> Result<()> {
    let (role, worktree, line_no) = (row.name.as_str(), row.worktree.as_str(), row.line);
    if role.contains('_') {
        return Err(fail(format!(
            "Invalid role '{role}' on line {line_no}: role names may not contain underscores"
        )));
    }
    if !grammar::valid_role(role) {
        return Err(fail(format!(
            "Invalid role '{}' on line {line_no}: role names must start with a letter or digit and contain only letters, digits and '-' (at most {} characters)",
            crate::text::escape(role),
            grammar::MAX_ROLE
        )));
    }
    if let Some(why) = crate::protocol::grammar::reserved_role(role) {
        return Err(fail(format!(
            "Invalid role '{role}' on line {line_no}: the name is reserved ({why})"
        )));
    }
    if rows.iter().any(|r| r.name == role) {
        return Err(fail(format!("Duplicate role '{role}' in {conf}")));
    }
    let shared = matches!(worktree, "master" | "none");
    if !shared && rows.iter().any(|r| r.worktree == worktree) {
        return Err(fail(format!("Duplicate worktree '{worktree}' in {conf}")));
    }
    if worktree.contains('/') || worktree == "." || worktree == ".." {
        return Err(fail(format!(
            "Invalid worktree '{worktree}' for role '{role}'"
        )));
    }
    Ok(())
}

/// The agent word of a window line: a model SwarmForge knows (any case),
/// `human`, or a command that can run.
fn agent_of(
    row: &ConfRole,
    agent_raw: &str,
    is_command: &dyn Fn(&str) -> bool,
) -> Result<ConfAgent> {
    let agent = agent_raw.to_lowercase();
    if MODEL_AGENTS.contains(&agent.as_str()) {
        Ok(ConfAgent::Model(agent))
    } else if agent == "human" {
        Ok(ConfAgent::Human)
    } else if is_command(agent_raw) {
        Ok(ConfAgent::Command(agent_raw.to_string()))
    } else {
        Err(fail(format!(
            "Unsupported agent '{agent}' for role '{}'",
            row.name
        )))
    }
}

/// Upstream's rule: "A route must be nonempty, contain no duplicate roles,
/// and name only roles defined by window lines."
fn check_route(card: &Card, rows: &[ConfRole]) -> Result<()> {
    let n = card.line;
    for (i, role) in card.route.iter().enumerate() {
        if !rows.iter().any(|r| &r.name == role) {
            return Err(fail(format!(
                "Invalid card '{}' on line {n}: role '{}' is not defined by a window line",
                crate::text::escape(&card.kind),
                crate::text::escape(role)
            )));
        }
        if card.route[..i].contains(role) {
            return Err(fail(format!(
                "Invalid card '{}' on line {n}: role '{role}' appears twice in its route",
                crate::text::escape(&card.kind)
            )));
        }
    }
    Ok(())
}

/// What today's SwarmForge would do with these lines that this project does
/// not (docs/swarmforge-compat.md §4), one line each.
fn notes(conf: &Conf, path: &Path) -> Vec<String> {
    let at = |line: usize| format!("{}:{line}", path.display());
    let mut v = Vec::new();
    if let Some((line, agent, _)) = &conf.lieutenant {
        v.push(format!(
            "{}: the forge host's Lieutenant ({}) is not started by `swarm up`",
            at(*line),
            crate::text::escape(agent)
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> ConfPaths {
        ConfPaths::for_root(Path::new("/p"))
    }

    fn run(text: &str) -> std::result::Result<Vec<ConfRole>, String> {
        run_conf(text).map(|c| c.roles)
    }

    fn run_conf(text: &str) -> std::result::Result<Conf, String> {
        parse(text, &paths(), &|w: &str| w.contains('/'), &|_: &Path| true)
            .map_err(|e| e.to_string().replacen(error_prefix(), "", 1))
    }

    /// The line forms of today's SwarmForge (its `lieutenant` README, quoted
    /// in docs/swarmforge-compat.md §4) are accepted.
    #[test]
    fn todays_line_forms_are_accepted() {
        let c = run_conf(
            "Lieutenant claude --model opus\nwindow architect claude master\nwindow-invisible coder codex coder task back-one --full-auto\nwindow qa claude qa batch back-all\nwindow ops claude ops forward-only\ncard feature architect coder qa\ncard bug coder qa\n",
        )
        .unwrap();
        assert_eq!(c.roles.len(), 4);
        assert!(c.roles[1].invisible && !c.roles[0].invisible);
        assert_eq!(c.roles[1].propagation, Propagation::BackOne);
        assert_eq!(c.roles[1].extra.as_deref(), Some("--full-auto"));
        assert_eq!(c.roles[2].propagation, Propagation::BackAll);
        assert_eq!(c.roles[2].mode, ReceiveMode::Batch);
        assert_eq!(c.roles[3].propagation, Propagation::ForwardOnly);
        assert_eq!(c.roles[3].extra, None);
        assert_eq!(c.cards.len(), 2);
        assert_eq!(c.cards[0].route, ["architect", "coder", "qa"]);
        assert_eq!(
            c.lieutenant,
            Some((1, "claude".to_string(), Some("--model opus".to_string())))
        );
        // Cards and propagation are acted on (crates/swarm-records/src/board/); the Lieutenant is not.
        assert_eq!(c.notes.len(), 1, "{:#?}", c.notes);
        assert!(c.notes[0].contains("swarmforge.conf:1") && c.notes[0].contains("Lieutenant"));
    }

    #[test]
    fn a_card_route_is_checked_as_upstream_checks_it() {
        let base = "window a claude master\nwindow b claude b\n";
        assert_eq!(
            run(&format!("{base}card x a c")).unwrap_err(),
            "Invalid card 'x' on line 3: role 'c' is not defined by a window line"
        );
        assert_eq!(
            run(&format!("{base}card x a b a")).unwrap_err(),
            "Invalid card 'x' on line 3: role 'a' appears twice in its route"
        );
        assert_eq!(
            run(&format!("{base}card x")).unwrap_err(),
            "Invalid config line 3: card x"
        );
        assert!(run(&format!("{base}card x b a")).is_ok());
    }

    #[test]
    fn parses_fields_modes_and_extra_args() {
        let r = run("# c\n\n  window coder Claude master batch --yolo  -x\r\nwindow QA human qa extra\nwindow s ./agents/s.sh none\n").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].agent, ConfAgent::Model("claude".into()));
        assert_eq!(r[0].mode, ReceiveMode::Batch);
        assert_eq!(r[0].extra.as_deref(), Some("--yolo -x"));
        assert_eq!(r[0].line, 3);
        assert_eq!(r[1].agent, ConfAgent::Human);
        assert_eq!(r[1].mode, ReceiveMode::Task);
        assert_eq!(r[1].extra.as_deref(), Some("extra"));
        assert_eq!(r[2].agent, ConfAgent::Command("./agents/s.sh".into()));
    }

    #[test]
    fn messages_in_order() {
        let cases = [
            ("window a b", "Invalid config line 1: window a b"),
            (
                "win a codex master",
                "Unknown config directive on line 1: win",
            ),
            (
                "window a_b codex master",
                "Invalid role 'a_b' on line 1: role names may not contain underscores",
            ),
            (
                "window a codex master\nwindow a codex master",
                "Duplicate role 'a' in /p/swarmforge/swarmforge.conf",
            ),
            (
                "window a codex w\nwindow b codex w",
                "Duplicate worktree 'w' in /p/swarmforge/swarmforge.conf",
            ),
            ("window a codex x/y", "Invalid worktree 'x/y' for role 'a'"),
            ("window a codex ..", "Invalid worktree '..' for role 'a'"),
            (
                "window a Vim master",
                "Unsupported agent 'vim' for role 'a'",
            ),
            ("", "No windows defined in /p/swarmforge/swarmforge.conf"),
        ];
        for (text, want) in cases {
            assert_eq!(run(text).unwrap_err(), want, "{text}");
        }
        assert!(run("window a codex master\nwindow b codex master\nwindow c codex none\nwindow d codex none").is_ok());
        assert!(run("window -a codex master")
            .unwrap_err()
            .starts_with("Invalid role '-a' on line 1: role names must"));
    }

    #[test]
    fn model_roles_need_a_prompt() {
        let e = parse(
            "window a codex master\n",
            &paths(),
            &|_: &str| false,
            &|_: &Path| false,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            format!(
                "{}Missing role prompt /p/swarmforge/roles/a.prompt",
                error_prefix()
            )
        );
        assert!(parse(
            "window a human master\n",
            &paths(),
            &|_: &str| false,
            &|_: &Path| false
        )
        .is_ok());
    }
}
