//! Is a Gemini CLI role set to use Gemini's own sandbox inside the swarm's
//! confinement? (docs/security.md, "The coding CLIs inside").
//!
//! Gemini CLI's sandbox (its docs, cli/sandbox.md) runs the CLI again in a
//! docker or podman container (or `sandbox-exec`, `runsc`, `lxc`), turned on
//! by `-s`/`--sandbox`, `GEMINI_SANDBOX`, or `tools.sandbox` (legacy:
//! `sandbox`) in a `settings.json`. Inside the swarm's bubblewrap sandbox
//! that cannot work as meant: rootless podman needs namespaces and folders
//! the sandbox does not give, and docker would start the container through
//! the host's daemon, outside the swarm's confinement. Rather than a pane
//! that fails obscurely (or an agent that is not confined), `swarm up`
//! refuses such a confined role and `swarm doctor` reports
//! GEMINI_SANDBOX_CONFINED, naming where the sandbox was turned on.

use std::ffi::OsString;
use std::path::Path;

use serde_json::Value;

use super::Cli;
use crate::launch::plan::{AgentSpec, Plan};

/// A confined Gemini CLI role set to start Gemini's own sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub role: String,
    /// Where it is turned on (an argument, the variable, a settings file).
    pub by: String,
}

impl Problem {
    pub fn message(&self) -> String {
        format!(
            "role {}: Gemini CLI is set to use its own container sandbox ({}), which cannot run inside the swarm's confinement (docker would start it outside the swarm's sandbox; podman cannot make its namespaces there)",
            self.role, self.by
        )
    }

    pub fn fix(&self) -> String {
        format!(
            "turn Gemini's sandbox off for role {} (remove the setting, or GEMINI_SANDBOX=false): the swarm's confinement already confines it; or set `launch: {{confine: false}}` to use Gemini's sandbox instead (docs/security.md)",
            self.role
        )
    }
}

/// The confined Gemini CLI roles of `plan` set to use Gemini's sandbox,
/// with the environment read through `var`.
pub fn problems(plan: &Plan, var: impl Fn(&str) -> Option<OsString>) -> Vec<Problem> {
    if !crate::launch::confine::enabled(plan) {
        return Vec::new();
    }
    let user = crate::launch::cli_state::folder(Cli::Gemini, &var).map(|d| d.join("settings.json"));
    plan.roles
        .iter()
        .filter_map(|r| {
            let AgentSpec::Preset {
                cli: Cli::Gemini,
                args,
                ..
            } = &r.agent
            else {
                return None;
            };
            let by = by_args(args)
                .or_else(|| {
                    var("GEMINI_SANDBOX")
                        .and_then(|v| v.into_string().ok())
                        .filter(|v| on(&Value::String(v.clone())))
                        .map(|v| format!("GEMINI_SANDBOX={v}"))
                })
                .or_else(|| by_settings(&r.worktree_path.join(".gemini/settings.json")))
                .or_else(|| user.as_deref().and_then(by_settings))?;
            Some(Problem {
                role: r.name.clone(),
                by,
            })
        })
        .collect()
}

fn by_args(args: &[String]) -> Option<String> {
    args.iter()
        .find(|a| {
            *a == "-s"
                || *a == "--sandbox"
                || a.strip_prefix("--sandbox=")
                    .is_some_and(|v| on(&Value::String(v.into())))
        })
        .map(|a| format!("its argument {a}"))
}

/// A `tools.sandbox` (or legacy top-level `sandbox`) that turns it on.
fn by_settings(f: &Path) -> Option<String> {
    let b = crate::fsx::read_bounded(f, crate::protocol::config::MAX_CONFIG_BYTES).ok()?;
    let v: Value = serde_json::from_slice(&b).ok()?;
    let set = v
        .get("tools")
        .and_then(|t| t.get("sandbox"))
        .or_else(|| v.get("sandbox"))?;
    on(set).then(|| format!("\"sandbox\" in {}", f.display()))
}

/// Gemini's reading: `true`, a command or a profile turns it on.
fn on(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => !matches!(s.trim(), "" | "false" | "0"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_way_gemini_turns_it_on_is_seen() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(by_args(&["-s".into()]), Some("its argument -s".into()));
        assert_eq!(by_args(&["--sandbox=false".into()]), None);
        assert!(by_args(&["--sandbox=docker".into()]).is_some());
        let f = d.path().join("settings.json");
        std::fs::write(&f, r#"{"tools": {"sandbox": "podman"}}"#).unwrap();
        assert!(by_settings(&f).unwrap().contains("settings.json"));
        std::fs::write(&f, r#"{"sandbox": true}"#).unwrap();
        assert!(by_settings(&f).is_some());
        std::fs::write(&f, r#"{"tools": {"sandbox": false}}"#).unwrap();
        assert_eq!(by_settings(&f), None);
    }
}
