//! Message ids as people type them: every command that takes an id accepts
//! a unique prefix of it (`swarm answer 20261130T1015`), as git takes a
//! short commit. An exact id always wins; otherwise exactly one known id
//! must start with what was typed.

use std::collections::BTreeSet;

use crate::error::{Error, Result, Token};
use crate::protocol::grammar;
use crate::protocol::layout::Project;
use crate::protocol::trail::{Scope, Trail};

/// Most candidates an ambiguity refusal lists.
const SHOWN: usize = 10;

/// What a typed id names among `known` ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    One(String),
    None,
    /// Every id that starts with the prefix, sorted.
    Many(Vec<String>),
}

/// Resolves `typed` against `known` (duplicates are fine).
pub fn resolve<'a>(typed: &str, known: impl IntoIterator<Item = &'a str>) -> Match {
    let mut hits: BTreeSet<&str> = BTreeSet::new();
    for id in known {
        if id == typed {
            return Match::One(id.to_string());
        }
        if !typed.is_empty() && id.starts_with(typed) {
            hits.insert(id);
        }
    }
    match hits.len() {
        0 => Match::None,
        1 => Match::One(hits.into_iter().next().unwrap_or_default().to_string()),
        _ => Match::Many(hits.into_iter().map(str::to_string).collect()),
    }
}

/// The refusal for a prefix that names several ids (exit 2): the first few
/// of them, and how to choose.
pub fn ambiguous(typed: &str, ids: &[String]) -> Error {
    let mut detail = format!(
        "'{}' is the start of {} message ids:",
        crate::text::escape(typed),
        ids.len()
    );
    for id in ids.iter().take(SHOWN) {
        detail.push_str(&format!("\n  {id}"));
    }
    if ids.len() > SHOWN {
        detail.push_str(&format!("\n  … and {} more", ids.len() - SHOWN));
    }
    detail.push_str("\n  hint: type more of the id, up to the whole of it");
    Error::refused(Token::AmbiguousId, detail, vec![])
}

/// The whole id `typed` names among the project's messages: a whole id (or
/// text no id can start with) is taken as it is, and the command then says
/// whether it exists; a prefix must
/// start exactly one message's id (else exit 1 when none does, exit 2 when
/// several do).
pub fn expand(project: &Project, typed: &str) -> Result<String> {
    // A whole id, or what no id can start with (`../x`, a file name): the
    // command's own check answers it.
    let id_chars = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if grammar::valid_message_id(typed) || typed.is_empty() || !typed.chars().all(id_chars) {
        return Ok(typed.to_string());
    }
    let t = Trail::load(project, &Scope::originals())?;
    match resolve(typed, t.originals.iter().map(|o| o.id())) {
        Match::One(id) => Ok(id),
        Match::Many(ids) => Err(ambiguous(typed, &ids)),
        Match::None => Err(Error::not_found(format!(
            "'{}' is not a message id, nor the start of one in {}.\n  hint: `swarm transcript --ids` shows every message with its id",
            crate::text::escape(typed),
            project.root.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_wins_then_unique_prefix() {
        let ids = [
            "20261130T101500Z_000001_from_a",
            "20261130T101500Z_000002_from_a",
            "20261130T101500Z_000002_from_ab",
        ];
        assert_eq!(
            resolve("20261130T101500Z_000002_from_a", ids),
            Match::One(ids[1].into())
        );
        assert_eq!(
            resolve("20261130T101500Z_000001", ids),
            Match::One(ids[0].into())
        );
        assert_eq!(resolve("2027", ids), Match::None);
        assert_eq!(resolve("", ids), Match::None);
        let Match::Many(m) = resolve("20261130T1015", ids) else {
            panic!("three ids start with it")
        };
        assert_eq!(m.len(), 3);
        let e = ambiguous("20261130T1015", &m).to_string();
        assert!(
            e.starts_with("AMBIGUOUS_ID: '20261130T1015' is the start of 3 message ids:"),
            "{e}"
        );
    }
}
