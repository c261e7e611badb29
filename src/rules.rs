//! Message types and their header rules, shared by the draft validator and the
//! daemon's re-check, so a file that `swarm-handoff` would refuse is refused
//! again at delivery (§15.14).

/// Headers only the tools write (§5.2); a draft that sets one is refused.
pub const RESERVED: &[&str] = &[
    "id",
    "from",
    "role",
    "recipient",
    "created_at",
    "enqueued_at",
    "dequeued_at",
    "completed_at",
];

/// Longest `task` / `message` value (UTF-16 units, as SwarmForge counts).
pub const MAX_LINE_CHARS: usize = 80;

/// Most recipients one message may name (keeps file names under NAME_MAX).
pub const MAX_RECIPIENTS: usize = 32;

/// The rules of one message type.
#[derive(Debug)]
pub struct TypeRule {
    pub name: &'static str,
    /// Draft headers this type accepts (besides none else).
    pub fields: &'static [&'static str],
    /// Whether the draft may carry a body after the blank line.
    pub body: bool,
}

pub const GIT_HANDOFF: TypeRule = TypeRule {
    name: "git_handoff",
    fields: &["type", "to", "priority", "task", "commit"],
    body: false,
};

pub const NOTE: TypeRule = TypeRule {
    name: "note",
    fields: &["type", "to", "priority", "message"],
    body: false,
};

pub const TYPES: &[&TypeRule] = &[&GIT_HANDOFF, &NOTE];

pub fn type_rule(name: &str) -> Option<&'static TypeRule> {
    TYPES.iter().copied().find(|t| t.name == name)
}

/// Every header a draft may write for some type.
pub fn known_draft_field(name: &str) -> bool {
    TYPES.iter().any(|t| t.fields.contains(&name))
}

/// `must be one of git_handoff or note` in SwarmForge's words.
pub fn type_list() -> String {
    let names: Vec<&str> = TYPES.iter().map(|t| t.name).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.to_string(),
        None => String::new(),
    }
}

pub fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// UTF-16 length, as SwarmForge measures header values.
pub fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

pub fn valid_priority(p: &str) -> bool {
    p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit())
}

/// Header lookup used by the validator: a draft (first value wins) or a parsed file.
pub trait Fields {
    fn field(&self, name: &str) -> Option<&str>;
    /// Field names in their original order.
    fn names(&self) -> Vec<&str>;
}

impl Fields for Vec<(String, String)> {
    fn field(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn names(&self) -> Vec<&str> {
        self.iter().map(|(n, _)| n.as_str()).collect()
    }
}

fn present<'a>(f: &'a impl Fields, name: &str) -> Option<&'a str> {
    f.field(name).filter(|v| !blank(v))
}

/// The validation groups of §5.3 in their order: base, recipient, per-field,
/// git, note. `is_role` answers whether a recipient is a known role. The commit
/// check through git is separate (it needs a repository).
///
/// `resolve_commit` runs the repository check of §5.4 on a well-formed commit
/// (in place in the git group, as SwarmForge orders it); the daemon passes a
/// resolver that accepts everything.
pub fn validate(
    f: &impl Fields,
    is_role: &dyn Fn(&str) -> bool,
    resolve_commit: &mut dyn FnMut(&str) -> Result<(), String>,
) -> Vec<String> {
    let mut errors = Vec::new();
    let ty = present(f, "type");
    let to = present(f, "to");
    let priority = present(f, "priority");

    // Base group.
    if ty.is_none() {
        errors.push("Missing required header 'type'.".to_string());
    }
    if to.is_none() {
        errors.push("Missing required header 'to'.".to_string());
    }
    if priority.is_none() {
        errors.push("Missing required header 'priority'.".to_string());
    }
    if let Some(t) = ty {
        if type_rule(t).is_none() {
            errors.push(format!(
                "Header 'type' must be one of {}; got '{t}'.",
                type_list()
            ));
        }
    }
    if let Some(p) = priority {
        if !valid_priority(p) {
            errors.push(format!(
                "Header 'priority' must be two digits from 00 to 99; got '{p}'."
            ));
        }
    }

    // Recipient group.
    if let Some(to) = to {
        errors.extend(recipient_errors(to, is_role));
    }

    // Per-field group.
    if let Some(t) = ty {
        let allowed = type_rule(t).map(|r| r.fields).unwrap_or(&[]);
        for name in f.names() {
            if !allowed.contains(&name) && known_draft_field(name) {
                errors.push(format!("Header '{name}' is not allowed for type '{t}'."));
            }
        }
    }

    // Git group.
    let is_git = ty == Some(GIT_HANDOFF.name);
    if is_git {
        match present(f, "task") {
            None => errors.push("Missing required header 'task' for git_handoff.".to_string()),
            Some(task) if utf16_len(task) > MAX_LINE_CHARS => errors.push(format!(
                "Header 'task' must be no longer than {MAX_LINE_CHARS} characters; got {}.",
                utf16_len(task)
            )),
            _ => {}
        }
    } else {
        if present(f, "commit").is_some() {
            errors.push("Header 'commit' is only allowed for git_handoff.".to_string());
        }
        if present(f, "task").is_some() {
            errors.push("Header 'task' is only allowed for git_handoff.".to_string());
        }
    }
    if is_git {
        let commit = present(f, "commit");
        match (commit_shape_error(commit), commit) {
            (Some(e), _) => errors.push(e),
            (None, Some(c)) => {
                if let Err(e) = resolve_commit(c) {
                    errors.push(e);
                }
            }
            (None, None) => {}
        }
    }

    // Note group.
    let is_note = ty == Some(NOTE.name);
    if is_note {
        match present(f, "message") {
            None => errors.push("Missing required header 'message' for note.".to_string()),
            Some(m) if utf16_len(m) > MAX_LINE_CHARS => errors.push(format!(
                "Header 'message' must be no longer than {MAX_LINE_CHARS} characters; got {}.",
                utf16_len(m)
            )),
            _ => {}
        }
    } else if present(f, "message").is_some() {
        errors.push("Header 'message' is only allowed for note.".to_string());
    }
    errors
}

/// The commit checks that need no repository.
pub fn commit_shape_error(commit: Option<&str>) -> Option<String> {
    match commit {
        None => Some("Missing required header 'commit' for git_handoff.".to_string()),
        Some(c) if c.len() != 10 || !c.bytes().all(|b| b.is_ascii_hexdigit()) => Some(format!(
            "Header 'commit' must be exactly 10 hexadecimal characters; got '{c}'."
        )),
        _ => None,
    }
}

/// Recipient checks of §5.3, per item in order; `to` is split keeping empties.
pub fn recipient_errors(to: &str, is_role: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut errors = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let items: Vec<&str> = to.split(',').collect();
    for item in &items {
        if blank(item) {
            errors.push("Header 'to' contains an empty recipient.".to_string());
            continue;
        }
        if item.contains('_') {
            errors.push(format!(
                "Recipient role '{item}' is invalid; role names may not contain underscores."
            ));
        }
        if seen.contains(item) {
            errors.push(format!("Duplicate recipient '{item}'."));
        }
        seen.push(item);
        if !is_role(item) {
            errors.push(format!("Unknown recipient role '{item}'."));
        }
    }
    if items.len() > MAX_RECIPIENTS {
        errors.push(format!(
            "Header 'to' must name at most {MAX_RECIPIENTS} recipients; got {}.",
            items.len()
        ));
    }
    errors
}

/// `to` split into recipients (after validation: non-empty, distinct).
pub fn recipients(to: &str) -> Vec<String> {
    to.split(',').map(str::to_string).collect()
}
