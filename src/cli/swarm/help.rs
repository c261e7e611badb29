//! `swarm --help`: the subcommands grouped by what a person is doing, not
//! one flat list of fifty. clap has no heading per subcommand, so the list
//! is drawn into the top-level help template from [`GROUPS`] and each
//! subcommand's own one-line about (one source for both). Only the top
//! level uses it: `swarm help <cmd>` and `swarm <cmd> --help` are clap's.

use clap::Subcommand;

/// Every subcommand, by what a person is doing; a test keeps each visible
/// subcommand in exactly one group.
pub const GROUPS: &[(&str, &[&str])] = &[
    (
        "Set up",
        &["init", "doctor", "trust", "untrust", "hooks", "shims"],
    ),
    ("Run", &["up", "down", "stop", "demo", "role", "fresh"]),
    (
        "Look",
        &[
            "status",
            "transcript",
            "receipts",
            "audit",
            "events",
            "search",
            "activity",
            "cost",
            "budget",
            "digest",
            "artifacts",
            "reservations",
        ],
    ),
    (
        "A person's work",
        &[
            "inbox",
            "answer",
            "permissions",
            "cancel",
            "approve",
            "deny",
            "pause",
            "resume",
            "card",
            "attach",
            "serve",
        ],
    ),
    (
        "Agents (what they run)",
        &[
            "prompt",
            "agents",
            "reserve",
            "release",
            "session",
            "discussion",
            "can-send",
            "hook",
            "mcp",
            "run-api",
        ],
    ),
    ("Across hosts", &["bridge", "a2a"]),
    (
        "Tools",
        &["archive", "ingest", "otel", "completions", "man", "help"],
    ),
];

/// The top-level help template: clap's about and usage, the grouped
/// subcommands, then the options.
pub fn template() -> String {
    let cmd = super::Command::augment_subcommands(clap::Command::new("swarm"));
    let about = |name: &str| -> String {
        if name == "help" {
            return "Print this message or the help of the given subcommand(s)".into();
        }
        cmd.find_subcommand(name)
            .and_then(|c| c.get_about())
            .map(|a| a.to_string())
            .unwrap_or_default()
    };
    let width = GROUPS
        .iter()
        .flat_map(|(_, names)| names.iter())
        .map(|n| n.len())
        .max()
        .unwrap_or(0);
    let mut s = String::from("{before-help}{about-with-newline}\n{usage-heading} {usage}\n");
    for (heading, names) in GROUPS {
        s.push_str(&format!("\n{heading}:\n"));
        for n in *names {
            s.push_str(&format!("  {n:<width$}  {}\n", about(n)));
        }
    }
    s.push_str("\nOptions:\n{options}{after-help}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_subcommand_is_in_exactly_one_group() {
        let cmd = super::super::Command::augment_subcommands(clap::Command::new("swarm"));
        let grouped: Vec<&str> = GROUPS.iter().flat_map(|(_, n)| n.iter().copied()).collect();
        for c in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
            let n = grouped.iter().filter(|g| **g == c.get_name()).count();
            assert_eq!(n, 1, "{} is in {n} groups", c.get_name());
        }
        for g in &grouped {
            assert!(
                *g == "help" || cmd.find_subcommand(g).is_some_and(|c| !c.is_hide_set()),
                "{g} is no visible subcommand"
            );
        }
    }
}
