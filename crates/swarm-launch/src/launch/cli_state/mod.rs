//! A confined agent's coding CLI and the person's CLI state
//! (docs/security.md, "Confinement"): the sandbox gives the agent a
//! private home, but the CLI's login, onboarding and the swarm's trust
//! records (`swarm trust`, launch/trust.rs) live in the person's home. So
//! the one state folder of the role's own CLI is shared into the sandbox,
//! writable, at its own path:
//!
//! * Claude Code: `~/.claude` (`$CLAUDE_CONFIG_DIR`): settings, the login
//!   (`.credentials.json`), the transcripts `swarm hook` reads;
//! * Codex: `~/.codex` (`$CODEX_HOME`): `auth.json`, `config.toml` with the
//!   trust and hook records;
//! * Gemini CLI: `~/.gemini` (`$GEMINI_CLI_HOME/.gemini`): settings,
//!   `trustedFolders.json`, the OAuth login; a trusted-folders file moved
//!   elsewhere by `$GEMINI_CLI_TRUSTED_FOLDERS_PATH` is shared read-only.
//!
//! What in that folder the person's own, unconfined sessions load as code
//! or instructions is read-only inside ([`read_only`]): the user settings
//! (a hook or MCP server written there would run in those sessions), the
//! plugins, extensions, commands, subagents, skills, rules and the user
//! memory file.
//!
//! Claude Code's other file, `~/.claude.json`, is not shared but copied:
//! claude_copy.rs.
//!
//! Nothing else of the person's home is visible: a role's sandbox never
//! gets another CLI's folder.

mod claude_copy;

pub use claude_copy::{claude_json, key_suffix, seed_claude_json};

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fsx;
use crate::launch::agents::Cli;

/// The state folder `cli` keeps, resolved from the environment (through
/// `var`) as the CLI resolves it; None without a HOME.
pub fn folder(cli: Cli, var: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = set("HOME");
    match cli {
        Cli::Claude => set("CLAUDE_CONFIG_DIR").or_else(|| Some(home?.join(".claude"))),
        Cli::Codex => set("CODEX_HOME").or_else(|| Some(home?.join(".codex"))),
        Cli::Gemini => Some(set("GEMINI_CLI_HOME").or(home)?.join(".gemini")),
    }
}

/// Gemini CLI's trusted-folders file when `GEMINI_CLI_TRUSTED_FOLDERS_PATH`
/// names one (Gemini's docs, cli/trusted-folders.md: "the desired absolute
/// file path"; it then reads and writes that file instead of
/// `~/.gemini/trustedFolders.json`). The sandbox shares it read-only:
/// `swarm trust` writes it outside, and its folder may hold anything.
pub fn gemini_trusted_folders(var: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    var("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// What a path of [`read_only`] is when the person has none: a file with
/// these bytes, or a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    File(&'static [u8]),
    Dir,
}

/// The paths in `cli`'s state `folder` from which the person's own,
/// unconfined sessions of that CLI load code or instructions, with what a
/// new one is. A confined agent gets them read-only (launch/confine/): a
/// hook, MCP server, plugin, command, rule or memory it wrote there would
/// run or speak in those sessions. None of them is written by the CLI in an
/// ordinary run (their own install commands, a trust dialog and the
/// "always allow" answers write them; `swarm trust` writes the trust
/// outside). Each CLI's docs and its pinned package name them:
///
/// * Claude Code: `settings.json`, `CLAUDE.md` (user memory), `plugins/`,
///   `commands/`, `agents/`, `skills/`, `output-styles/`, `rules/`;
/// * Codex: `config.toml` (which also holds the person's trust of each
///   hook, so a hook planted in `hooks.json` waits for their review),
///   `AGENTS.md`, `AGENTS.override.md` (an empty one is skipped), `rules/`
///   (execpolicy: an allow rule skips the approval), `prompts/`, `skills/`,
///   `plugins/`;
/// * Gemini CLI: `settings.json`, `GEMINI.md`, `trustedFolders.json` (a
///   trusted folder's own settings and hooks load unasked), `extensions/`,
///   `commands/`, `agents/`, `skills/`, `policies/` (allow rules);
/// * for each, `hooks/`, where the person's hook scripts conventionally
///   live (a hook in the settings runs what is there).
pub fn read_only(cli: Cli, folder: &Path) -> Vec<(PathBuf, Shape)> {
    use Shape::{Dir, File};
    let list: &[(&str, Shape)] = match cli {
        Cli::Claude => &[
            ("settings.json", File(b"{}\n")),
            ("CLAUDE.md", File(b"")),
            ("plugins", Dir),
            ("commands", Dir),
            ("agents", Dir),
            ("skills", Dir),
            ("output-styles", Dir),
            ("rules", Dir),
            ("hooks", Dir),
        ],
        Cli::Codex => &[
            ("config.toml", File(b"")),
            ("AGENTS.md", File(b"")),
            ("AGENTS.override.md", File(b"")),
            ("rules", Dir),
            ("prompts", Dir),
            ("skills", Dir),
            ("plugins", Dir),
            ("hooks", Dir),
        ],
        Cli::Gemini => &[
            ("settings.json", File(b"{}\n")),
            ("GEMINI.md", File(b"")),
            ("trustedFolders.json", File(b"{}\n")),
            ("extensions", Dir),
            ("commands", Dir),
            ("agents", Dir),
            ("skills", Dir),
            ("policies", Dir),
            ("hooks", Dir),
        ],
    };
    list.iter().map(|(n, k)| (folder.join(n), *k)).collect()
}

/// Makes `path` (one of [`read_only`]) as `shape` when it does not exist,
/// so the sandbox has something to mount read-only (a missing one the
/// agent could create in the writable folder). A symlink (a dotfiles
/// manager's) is left as it is: the mount takes its target, so a link to
/// nothing is refused, naming it (there would be nothing to mount).
pub fn ensure_read_only(path: &Path, shape: Shape) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        if std::fs::metadata(path).is_err() {
            return Err(Error::bad_file_hint(
                path,
                "a link to nothing, which a confined agent's sandbox cannot mount read-only",
                "make its target or remove the link",
            ));
        }
        return Ok(());
    }
    let made = match shape {
        Shape::Dir => fsx::ensure_dirs(&[path]),
        Shape::File(empty) => fsx::publish(path.parent().unwrap_or(Path::new(".")), path, empty),
    };
    match made {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn folders_follow_the_clis_overrides() {
        let h = env(&[("HOME", "/h")]);
        assert_eq!(folder(Cli::Claude, &h), Some("/h/.claude".into()));
        assert_eq!(folder(Cli::Codex, &h), Some("/h/.codex".into()));
        assert_eq!(folder(Cli::Gemini, &h), Some("/h/.gemini".into()));
        assert_eq!(claude_json(&h), Some("/h/.claude.json".into()));
        let o = env(&[
            ("HOME", "/h"),
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/x"),
            ("GEMINI_CLI_HOME", "/g"),
        ]);
        assert_eq!(folder(Cli::Claude, &o), Some("/c".into()));
        assert_eq!(folder(Cli::Codex, &o), Some("/x".into()));
        assert_eq!(folder(Cli::Gemini, &o), Some("/g/.gemini".into()));
        assert_eq!(claude_json(&o), None);
        assert_eq!(folder(Cli::Codex, &env(&[])), None);
        assert_eq!(gemini_trusted_folders(&h), None);
        let t = env(&[("GEMINI_CLI_TRUSTED_FOLDERS_PATH", "/etc/g/trust.json")]);
        assert_eq!(gemini_trusted_folders(&t), Some("/etc/g/trust.json".into()));
    }

    #[test]
    fn a_missing_loaded_path_is_made_and_an_existing_one_kept() {
        let d = tempfile::tempdir().unwrap();
        let paths = read_only(Cli::Claude, d.path());
        assert!(paths.contains(&(d.path().join("plugins"), Shape::Dir)));
        for (p, shape) in &paths {
            ensure_read_only(p, *shape).unwrap();
        }
        assert_eq!(
            std::fs::read(d.path().join("settings.json")).unwrap(),
            b"{}\n"
        );
        assert_eq!(std::fs::read(d.path().join("CLAUDE.md")).unwrap(), b"");
        assert!(d.path().join("commands").is_dir());
        // The person's own are left as they are, a link too.
        std::fs::write(d.path().join("CLAUDE.md"), "theirs").unwrap();
        std::os::unix::fs::symlink(d.path().join("commands"), d.path().join("rules2")).unwrap();
        ensure_read_only(&d.path().join("CLAUDE.md"), Shape::File(b"")).unwrap();
        ensure_read_only(&d.path().join("rules2"), Shape::Dir).unwrap();
        std::os::unix::fs::symlink("/nowhere", d.path().join("rules3")).unwrap();
        let e = ensure_read_only(&d.path().join("rules3"), Shape::Dir).unwrap_err();
        assert!(e.to_string().contains("rules3"), "{e}");
        assert!(d.path().join("rules3").symlink_metadata().is_ok());
        assert_eq!(
            std::fs::read(d.path().join("CLAUDE.md")).unwrap(),
            b"theirs"
        );
        assert!(d
            .path()
            .join("rules2")
            .symlink_metadata()
            .unwrap()
            .is_symlink());
        let e = ensure_read_only(&d.path().join("no/such/x"), Shape::File(b"")).unwrap_err();
        assert!(e.to_string().contains("no/such/x"), "{e}");
    }
}
