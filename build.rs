//! Build script: the commit `swarm --version` prints beside the version
//! (Cargo.toml's, the one place the version is written).
//!
//! `SWARM_BUILD_COMMIT` when set (scripts/package.sh, .ci/run and the
//! release workflow set it from git, so a shipped binary always names the
//! commit it was built from), else `git rev-parse` at the time this script
//! runs, else `unknown` (a source tree without git). The script reruns only
//! when that variable or this file changes, not on every commit: a rerun
//! rebuilds every target of the package, which a commit alone must not cost.
//! So a long-lived developer `target/` may name an older commit; what is
//! packaged never does.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SWARM_BUILD_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    let commit = std::env::var("SWARM_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    // Only what a commit id can hold: the value ends up in --version output.
    let commit: String = commit
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
        .take(64)
        .collect();
    println!("cargo:rustc-env=SWARM_BUILD_COMMIT={commit}");
}

fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    let id = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !id.is_empty()).then_some(id)
}
