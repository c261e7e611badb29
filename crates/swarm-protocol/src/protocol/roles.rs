//! `.swarmforge/roles.tsv`: seven TAB-separated columns per role
//! (docs/protocol.md §2).

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::protocol::grammar;

/// How a role accepts work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiveMode {
    Task,
    Batch,
}

impl ReceiveMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiveMode::Task => "task",
            ReceiveMode::Batch => "batch",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    pub name: String,
    pub worktree_name: String,
    pub worktree_path: PathBuf,
    pub session: String,
    pub display: String,
    pub agent: String,
    /// Column 7 as written; empty means `task` (docs/protocol.md §2).
    pub mode: String,
}

impl Role {
    /// Its worktree folder: column 3 as written when absolute, else under
    /// the project root `root` (roles.tsv may name it either way).
    pub fn worktree_in(&self, root: &Path) -> PathBuf {
        if self.worktree_path.is_absolute() {
            self.worktree_path.clone()
        } else {
            root.join(&self.worktree_path)
        }
    }

    /// The receive mode, or the raw text when it is neither `task` nor `batch`.
    pub fn receive_mode(&self) -> std::result::Result<ReceiveMode, &str> {
        match self.mode.as_str() {
            "" | "task" => Ok(ReceiveMode::Task),
            "batch" => Ok(ReceiveMode::Batch),
            other => Err(other),
        }
    }

    pub fn is_human(&self) -> bool {
        self.agent == "human"
    }

    /// A role on another host (docs/bridge.md): its worktree column is
    /// `@<host>` and its path a local proxy the bridge drains; never woken
    /// here.
    pub fn is_remote(&self) -> bool {
        self.worktree_name.starts_with('@')
    }

    /// Whether wake-ups for this role happen on this host.
    pub fn wakes_here(&self) -> bool {
        !self.is_human() && !self.is_remote()
    }
}

/// Largest roles.tsv read.
pub const MAX_BYTES: u64 = 1024 * 1024;

/// The role table, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Roles {
    pub roles: Vec<Role>,
    /// Lines that were skipped, with the reason (shown by `swarm status`).
    pub problems: Vec<String>,
    /// Name → position in `roles`, so a lookup costs the same with 10 000
    /// roles as with 3 (the daemon looks roles up for every file it reads).
    index: HashMap<String, usize>,
}

/// SwarmForge's display name: `-`/`_` to spaces, each word capitalised.
pub fn display_name(role: &str) -> String {
    role.replace(['-', '_'], " ")
        .split_whitespace()
        .map(|w| {
            let mut cs = w.chars();
            match cs.next() {
                Some(f) => f.to_uppercase().collect::<String>() + &cs.as_str().to_lowercase(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Roles {
    /// Reads the table; a missing file is an empty table.
    /// A FIFO, a device or a huge file there is refused instead of blocking
    /// or exhausting the caller.
    pub fn load(path: &Path) -> Result<Roles> {
        match crate::fsx::read_bounded(path, MAX_BYTES) {
            Ok(bytes) => Ok(Roles::parse(&String::from_utf8_lossy(&bytes))),
            Err(crate::fsx::ReadRefusal::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                Ok(Roles::default())
            }
            Err(crate::fsx::ReadRefusal::Io(e)) => Err(Error::io(path, e)),
            Err(e) => Err(Error::bad_file_hint(
                path,
                e,
                "roles.tsv must be a regular file (swarm init writes it)",
            )),
        }
    }

    pub fn parse(text: &str) -> Roles {
        let mut out = Roles::default();
        for (i, raw) in text.lines().enumerate() {
            // A CRLF file must not leak `\r` into paths or modes
            // (docs/protocol.md §2).
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            if line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            let name = f[0];
            if f.len() < 3 {
                out.problems.push(format!(
                    "line {}: fewer than 3 TAB-separated columns (7 expected)",
                    i + 1
                ));
                continue;
            }
            if !grammar::valid_role(name) {
                out.problems.push(format!(
                    "line {}: invalid role name '{}'",
                    i + 1,
                    crate::text::escape(name)
                ));
                continue;
            }
            if let Some(why) = grammar::reserved_role(name) {
                out.problems.push(format!(
                    "line {}: role name '{name}' is reserved ({why}); rename the role",
                    i + 1
                ));
                continue;
            }
            if out.index.contains_key(name) {
                out.problems
                    .push(format!("line {}: duplicate role '{name}'", i + 1));
                continue;
            }
            out.index.insert(name.to_string(), out.roles.len());
            let col = |n: usize| f.get(n).copied().unwrap_or("").to_string();
            out.roles.push(Role {
                name: name.to_string(),
                worktree_name: col(1),
                worktree_path: PathBuf::from(f[2]),
                session: col(3),
                display: col(4),
                agent: col(5),
                mode: col(6),
            });
        }
        out
    }

    /// Hint lines naming the skipped lines of `path`, for an unknown-role
    /// error (a table typed with spaces instead of TABs reads as empty).
    pub fn problems_hint(&self, path: &Path) -> String {
        self.problems
            .iter()
            .map(|p| format!("\n  hint: {}: {p}; that line is skipped", path.display()))
            .collect()
    }

    /// `to` as the roles it addresses (`all`: every role but `from`).
    pub fn recipients(&self, to: &str, from: &str) -> Vec<String> {
        grammar::recipients(to, from, self.roles.iter().map(|r| r.name.as_str()))
    }

    /// The role names in table order, for "known roles: …" in errors.
    pub fn names_in_words(&self) -> String {
        let names: Vec<&str> = self.roles.iter().map(|r| r.name.as_str()).collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    }

    /// The hint lines for an unknown role: the skipped lines of `path`, then
    /// the roles it does name.
    pub fn unknown_hint(&self, path: &Path) -> String {
        format!(
            "{}\n  hint: the roles in {}: {}",
            self.problems_hint(path),
            path.display(),
            self.names_in_words()
        )
    }

    /// A table of these roles (in this order; later duplicates are not found).
    pub fn from_roles(roles: Vec<Role>) -> Roles {
        let mut index = HashMap::with_capacity(roles.len());
        for (i, r) in roles.iter().enumerate() {
            index.entry(r.name.clone()).or_insert(i);
        }
        Roles {
            roles,
            problems: Vec::new(),
            index,
        }
    }

    pub fn find(&self, name: &str) -> Option<&Role> {
        // `roles` is public: when it was edited behind the index, search.
        if self.index.len() == self.roles.len() {
            let r = self.roles.get(*self.index.get(name)?)?;
            if r.name == name {
                return Some(r);
            }
        }
        self.roles.iter().find(|r| r.name == name)
    }

    /// Distinct worktree paths in table order.
    pub fn worktrees(&self) -> Vec<PathBuf> {
        let mut seen: HashSet<&Path> = HashSet::with_capacity(self.roles.len());
        self.roles
            .iter()
            .filter(|r| seen.insert(r.worktree_path.as_path()))
            .map(|r| r.worktree_path.clone())
            .collect()
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        for r in &self.roles {
            s.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                r.name,
                r.worktree_name,
                r.worktree_path.display(),
                r.session,
                r.display,
                r.agent,
                r.mode
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_tolerances() {
        let t = "coder\tmaster\t/p\tswarmforge-coder\tCoder\tcodex\tbatch\r\n\n\
                 QA\tqa\t/p/.worktrees/qa\ts\tQa\tclaude\t\nbad_name\tm\t/p\nshort\n";
        let r = Roles::parse(t);
        assert_eq!(r.roles.len(), 2);
        assert_eq!(
            r.find("coder").unwrap().receive_mode(),
            Ok(ReceiveMode::Batch)
        );
        assert_eq!(r.find("QA").unwrap().receive_mode(), Ok(ReceiveMode::Task));
        assert_eq!(r.problems.len(), 2);
        assert_eq!(display_name("code-reviewer"), "Code Reviewer");
        assert_eq!(display_name("QA"), "Qa");
    }

    #[test]
    fn reserved_names_are_skipped_and_lookups_use_the_index() {
        let r = Roles::parse("all\tm\t/p\nhandoffd\tm\t/p\na\tm\t/p\na\tm\t/q\n");
        assert_eq!(r.roles.len(), 1);
        assert!(r.problems[0].starts_with("line 1: role name 'all' is reserved"));
        assert!(r.problems[1].starts_with("line 2: role name 'handoffd' is reserved"));
        assert_eq!(r.problems[2], "line 4: duplicate role 'a'");
        assert_eq!(r.find("a").unwrap().worktree_path, PathBuf::from("/p"));
        // Edited behind the index: still found.
        let mut e = r.clone();
        e.roles.insert(0, e.roles[0].clone());
        e.roles[0].name = "b".into();
        assert_eq!(e.find("b").unwrap().name, "b");
        assert_eq!(e.find("a").unwrap().name, "a");
    }
}
