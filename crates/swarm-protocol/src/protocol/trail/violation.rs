//! One broken rule of the trail, as `swarm audit --check` reports it: the
//! audit (`views::audit`) and the bridge's audit of its control records
//! (`bridge::control_view`) both find them, so the type sits below both.

use serde_json::{json, Value};

use crate::text::escape;

/// One broken rule. `kind` is a stable token; `subject` is a path or an id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub kind: &'static str,
    pub subject: String,
    pub detail: String,
}

impl Violation {
    /// `VIOLATION <kind> <subject>: <detail>`, escaped to one line.
    pub fn line(&self) -> String {
        format!(
            "VIOLATION {} {}: {}\n",
            self.kind,
            escape(&self.subject),
            escape(&self.detail)
        )
    }

    pub fn json(&self) -> Value {
        json!({"kind": self.kind, "subject": self.subject, "detail": self.detail})
    }
}
