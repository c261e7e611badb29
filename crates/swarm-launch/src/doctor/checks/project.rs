//! The project itself: `swarm init` has run, `swarm.yaml` loads (each error
//! with its line, column and repair), and what SwarmForge features it uses.

use super::super::{Context, Finding};
use crate::launch::plan::Source;
use crate::protocol::swarmforge_conf;
use crate::protocol::swarmforge_conf::ConfPaths;

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
            let e = e.to_string();
            out.push(
                Finding::new(
                    "CONFIG_INVALID",
                    e.lines().next().unwrap_or(&e).to_string(),
                    repair(hints(&e)),
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
    if !matches!(plan.source, Source::SwarmforgeConf(_)) {
        return Vec::new();
    }
    let paths = ConfPaths::for_root(&cx.project.root);
    let Ok(conf) = swarmforge_conf::load(&paths) else {
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
