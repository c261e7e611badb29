//! What swarm.yaml decides before anyone is asked (docs/agents.md,
//! "Decided in swarm.yaml"): a role's `permissions:` map a tool, written
//! `<kind>: <title>` as `swarm permissions` shows it and matched as a glob
//! (`*` any run of characters, `/` included), to `allow`, `deny` or `ask`.
//! `allow` answers the request with the agent's "allow once" and `deny`
//! with its "reject", without asking a person; `ask`, and every tool no
//! pattern matches, is a person's decision.
//!
//! Why the most cautious match wins (deny, then ask, then allow) and not
//! the first: a YAML map has no order a reader can rely on, and a narrower
//! `ask` or `deny` written beside a wide `allow` must hold.
//!
//! Why an allow is sometimes put to a person anyway: a role over its
//! budget (docs/cost.md) or whose last [`MAX_FAILED`] tool calls failed is
//! not one to let run unwatched; the journal and the activity say why.
//!
//! The invariants: the rules are the ones of the project's swarm.yaml as
//! the client read it when it started (never a file in the agent's
//! worktree, which the agent writes); every pre-decision and every allow
//! held back is a journal event (`permission_allowed`,
//! `permission_denied`, `permission_held`) whose `from` is `swarm.yaml`
//! or the person whose "always" it was.

use std::collections::BTreeMap;

use globset::{GlobBuilder, GlobMatcher};

use crate::daemon::journal::{self, Event, Kind};
use crate::protocol::config::ToolDecision;
use crate::protocol::layout::Project;

/// Who decided, in the journal and the activity.
pub const SWARM_YAML: &str = "swarm.yaml";
/// Tool calls failed in a row after which an allow asks a person.
pub const MAX_FAILED: u32 = 3;
/// The longest pattern taken.
const MAX_PATTERN: usize = 300;

/// A role's `permissions:`, compiled.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    rules: Vec<(String, GlobMatcher, ToolDecision)>,
}

/// Why `pattern` cannot be a `permissions:` key (None: it can).
pub fn pattern_problem(pattern: &str) -> Option<String> {
    if pattern.trim().is_empty() {
        return Some("is empty".into());
    }
    if pattern.chars().count() > MAX_PATTERN {
        return Some(format!("is longer than {MAX_PATTERN} characters"));
    }
    if pattern.chars().any(char::is_control) {
        return Some("contains a control character".into());
    }
    glob(pattern)
        .err()
        .map(|e| format!("is not a glob pattern ({e})"))
}

fn glob(pattern: &str) -> Result<GlobMatcher, globset::Error> {
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
}

impl Rules {
    /// The rules of `map` (checked by launch/plan/validate.rs at `swarm
    /// up`; a pattern that does not compile here is left out, so it
    /// decides nothing and a person is asked).
    pub fn new(map: &BTreeMap<String, ToolDecision>) -> Rules {
        Rules {
            rules: map
                .iter()
                .filter_map(|(p, d)| Some((p.clone(), glob(p).ok()?, *d)))
                .collect(),
        }
    }

    /// What the rules decide for the tool (`kind`, `title`), and the
    /// pattern that decided: the most cautious of the matches.
    pub fn decide(&self, kind: &str, title: &str) -> Option<(ToolDecision, &str)> {
        let tool = format!("{kind}: {title}");
        self.rules
            .iter()
            .filter(|(_, g, _)| g.is_match(&tool))
            .map(|(p, _, d)| (*d, p.as_str()))
            .min_by_key(|(d, _)| match d {
                ToolDecision::Deny => 0,
                ToolDecision::Ask => 1,
                ToolDecision::Allow => 2,
            })
    }
}

/// Journals a pre-decision or a held allow: `kind` for `role`, decided by
/// `from` (swarm.yaml, or a person), `id` the clarify it concerns if any.
pub fn journal(
    project: &Project,
    kind: Kind,
    role: &str,
    from: &str,
    id: Option<&str>,
    reason: String,
) {
    let mut e = Event::new(kind).recipient(role).reason(reason);
    e.from = Some(from.to_string());
    e.id = id.map(str::to_string);
    journal::record_outside(project, &e);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_cautious_match_decides_and_bad_patterns_are_named() {
        let map: BTreeMap<String, ToolDecision> = [
            ("execute: *", ToolDecision::Allow),
            ("execute: rm *", ToolDecision::Deny),
            ("edit: src/*", ToolDecision::Ask),
            ("edit: *", ToolDecision::Allow),
        ]
        .into_iter()
        .map(|(p, d)| (p.to_string(), d))
        .collect();
        let r = Rules::new(&map);
        assert_eq!(
            r.decide("execute", "cargo test"),
            Some((ToolDecision::Allow, "execute: *"))
        );
        assert_eq!(
            r.decide("execute", "rm -rf /"),
            Some((ToolDecision::Deny, "execute: rm *"))
        );
        assert_eq!(
            r.decide("edit", "src/a/b.rs").map(|d| d.0),
            Some(ToolDecision::Ask)
        );
        assert_eq!(
            r.decide("edit", "README.md").map(|d| d.0),
            Some(ToolDecision::Allow)
        );
        assert_eq!(r.decide("fetch", "https://x"), None);
        assert!(pattern_problem("execute: [x")
            .unwrap()
            .starts_with("is not a glob pattern"));
        assert!(pattern_problem(" ").is_some());
        assert!(pattern_problem("a\u{1b}b").is_some());
        assert_eq!(pattern_problem("execute: cargo test *"), None);
    }
}
