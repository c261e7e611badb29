//! Where users live (issue 42, point 11): a real account, its own copies of
//! the binaries and of the agent CLIs, and bubblewrap as the distribution
//! installs it. The checkout may sit in a folder only its owner can enter
//! (a home of mode 700 or 750): nothing here loosens its permissions; the
//! account gets what a person has instead.
//!
//! - [`Account`]: `swarm-user` when the tests run as root (`.ci/run` makes
//!   it, its home of mode 750), else the user running them, with a stand-in
//!   home of mode 750 under their own (a developer's own files are never
//!   touched);
//! - [`Account::installed`]: the five binaries as `cargo install` leaves
//!   them, in a folder inside that home the account owns (one per test
//!   process, so two checkouts' runs never mix their builds);
//! - [`Account::agent_clis`]: the real CLIs as that user installs them
//!   (`npm install -g` into `~/.npm-global`, which `.ci/run` does for
//!   `swarm-user` from the npm cache; a user running the tests has theirs
//!   in `target/agent-clis`);
//! - [`distro_bwrap`]: the distribution's bubblewrap where a person has it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The five commands every install puts on PATH.
pub const BINARIES: [&str; 5] = [
    "swarm",
    "swarm-handoff",
    "ready-next",
    "done-current",
    "handoffd",
];

use super::{chown_tree, require_capability};

/// The account the user-facing tests run `swarm` as.
#[derive(Clone, Debug)]
pub struct Account {
    pub name: String,
    /// (uid, gid) to switch to; None: this process is that user already.
    pub ids: Option<(u32, u32)>,
    /// Its HOME (mode 750).
    pub home: PathBuf,
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The account, or None after a NOTE (a failure in CI).
#[track_caller]
pub fn account() -> Option<Account> {
    static FOUND: OnceLock<Result<Account, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| if is_root() { swarm_user() } else { stand_in() });
    require_capability(
        "use an ordinary user's account for the tests' swarms",
        "run .ci/run as root, which makes swarm-user (useradd --user-group --create-home --shell /bin/bash swarm-user; chmod 750 its home)",
        found.clone(),
    )
}

/// `swarm-user` from the password database, its home mode 750 as a
/// distribution's `useradd` makes it (Debian's HOME_MODE) or stricter.
fn swarm_user() -> Result<Account, String> {
    let o = std::process::Command::new("getent")
        .args(["passwd", "swarm-user"])
        .output()
        .map_err(|e| format!("getent: {e}"))?;
    let line = String::from_utf8_lossy(&o.stdout).into_owned();
    let f: Vec<&str> = line.trim().split(':').collect();
    let (Some(u), Some(g), Some(home)) = (
        f.get(2).and_then(|u| u.parse().ok()),
        f.get(3).and_then(|g| g.parse().ok()),
        f.get(5).map(PathBuf::from).filter(|h| h.is_dir()),
    ) else {
        return Err("no user swarm-user with a home folder".into());
    };
    let mode = std::fs::metadata(&home)
        .map_err(|e| e.to_string())?
        .permissions()
        .mode();
    if mode & 0o007 != 0 {
        return Err(format!(
            "{} has mode {:o}: a user's home is closed to others (750 or 700)",
            home.display(),
            mode & 0o777
        ));
    }
    Ok(Account {
        name: "swarm-user".into(),
        ids: Some((u, g)),
        home,
    })
}

/// Not root: this user, with a mode-750 home of its own under theirs
/// (`~/.cache/swarm-handoff-tests/home`), so no test writes into the
/// developer's own `~/code`, `~/.claude` or `~/.gitconfig`.
fn stand_in() -> Result<Account, String> {
    let real = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h.is_dir())
        .ok_or("HOME is not set to a folder")?;
    let home = real.join(".cache/swarm-handoff-tests/home");
    std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o750))
        .map_err(|e| format!("{}: {e}", home.display()))?;
    let name = std::env::var("USER").unwrap_or_else(|_| "me".into());
    Ok(Account {
        name,
        ids: None,
        home,
    })
}

impl Account {
    /// The words that run a program as this account (`setpriv`), or none.
    pub fn wrapper(&self) -> Vec<String> {
        match self.ids {
            Some((u, g)) => vec![
                "setpriv".into(),
                format!("--reuid={u}"),
                format!("--regid={g}"),
                "--clear-groups".into(),
            ],
            None => Vec::new(),
        }
    }

    /// Gives `path` (and everything under it) to this account.
    pub fn give(&self, path: &Path) {
        if let Some(ids) = self.ids {
            chown_tree(path, ids);
        }
    }

    /// A folder of this account's, made (with its parents) as it would
    /// make it.
    pub fn make_dir(&self, path: &Path) {
        let mut missing: Vec<&Path> = path.ancestors().take_while(|a| !a.exists()).collect();
        std::fs::create_dir_all(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        missing.reverse();
        for d in missing {
            self.give(d);
        }
    }

    /// The five binaries, installed as `cargo install` leaves them, in a
    /// `bin` folder inside this account's home that it owns: one per test
    /// process (`~/.cache/swarm-handoff-tests/cargo-<pid>/bin`), older
    /// processes' folders removed. With `SWARM_USERLAB_BIN`, that folder
    /// instead: the commands as a package installed them for this account
    /// (scripts/install-proof.sh: the npm prefix's `bin`, the venv's).
    pub fn installed(&self) -> PathBuf {
        static DONE: OnceLock<PathBuf> = OnceLock::new();
        DONE.get_or_init(|| {
            if let Some(dir) = std::env::var_os("SWARM_USERLAB_BIN") {
                let dir = PathBuf::from(dir);
                for name in BINARIES {
                    assert!(
                        dir.join(name).exists(),
                        "SWARM_USERLAB_BIN={} has no {name}: install the package there first",
                        dir.display()
                    );
                }
                return dir;
            }
            let base = self.home.join(".cache/swarm-handoff-tests");
            self.make_dir(&base);
            for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("cargo-").and_then(|p| p.parse().ok()) {
                    // SAFETY: kill(2) with signal 0 only checks the process exists.
                    let gone = unsafe { libc::kill(pid, 0) } != 0
                        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
                    if gone {
                        let _ = std::fs::remove_dir_all(e.path());
                    }
                }
            }
            let bin = base.join(format!("cargo-{}/bin", std::process::id()));
            self.make_dir(&bin);
            for name in BINARIES {
                let to = bin.join(name);
                let _ = std::fs::remove_file(&to);
                // A hard link costs nothing and reads as the user's own
                // file; across file systems, a copy.
                if std::fs::hard_link(super::bin(name), &to).is_err() {
                    std::fs::copy(super::bin(name), &to)
                        .unwrap_or_else(|e| panic!("install {name} into {}: {e}", bin.display()));
                    self.give(&to);
                }
            }
            bin
        })
        .clone()
    }

    /// The folder holding this account's `claude`, `codex` and `gemini`:
    /// for `swarm-user`, `~/.npm-global/bin` (`npm install -g` with its own
    /// prefix, as `.ci/run` installs them); for the user running the tests,
    /// their `target/agent-clis` (or `SWARM_AGENT_CLIS`). None after a NOTE
    /// (a failure in CI) when one of them does not run as this account.
    #[track_caller]
    pub fn agent_clis(&self) -> Option<PathBuf> {
        let bin = match self.ids {
            Some(_) => self.home.join(".npm-global/bin"),
            None => super::agent_clis_dir().join("node_modules/.bin"),
        };
        let probe = ["claude", "codex", "gemini"].iter().try_for_each(|cli| {
            let mut words = self.wrapper();
            words.push(bin.join(cli).display().to_string());
            let o = std::process::Command::new(&words[0])
                .args(&words[1..])
                .arg("--version")
                .env("HOME", &self.home)
                .env("PATH", path_with(&[&bin]))
                .current_dir(&self.home)
                .output()
                .map_err(|e| format!("{}: {e}", words[0]))?;
            if o.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{} --version as {}: {}",
                    bin.join(cli).display(),
                    self.name,
                    String::from_utf8_lossy(&o.stderr)
                ))
            }
        });
        require_capability(
            &format!("run the agent CLIs {} installed", self.name),
            "run .ci/run, which installs them as swarm-user with npm install -g into ~/.npm-global (its own prefix)",
            probe,
        )?;
        Some(bin)
    }
}

/// The machine's PATH with `first` before it.
pub fn path_with(first: &[&Path]) -> std::ffi::OsString {
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(
        first
            .iter()
            .map(|p| p.to_path_buf())
            .chain(std::env::split_paths(&rest)),
    )
    .unwrap()
}

/// The distribution's bubblewrap as a person has it: `bwrap` in a system
/// folder on PATH (`apt-get install bubblewrap`) gives None, nothing to
/// set; without one, Debian's package `.ci/run` unpacks into
/// `target/bubblewrap`, copied into a folder of the account's (a checkout's
/// `target` may be closed to it), to be named in `SWARM_BWRAP`. The copy is
/// also None after a NOTE (a failure in CI) when neither exists.
#[track_caller]
pub fn distro_bwrap(acct: &Account) -> Option<Option<PathBuf>> {
    if ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
        .iter()
        .any(|b| Path::new(b).is_file())
    {
        return Some(None);
    }
    let unpacked = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bubblewrap/usr/bin/bwrap");
    let probe = if unpacked.is_file() {
        Ok(())
    } else {
        Err(format!("neither a system bwrap nor {}", unpacked.display()))
    };
    require_capability(
        "find the distribution's bubblewrap",
        "apt-get install -y bubblewrap (as .ci/run does)",
        probe,
    )?;
    static COPY: OnceLock<PathBuf> = OnceLock::new();
    Some(Some(
        COPY.get_or_init(|| {
            // Beside the binaries, not on PATH (Codex prefers a `bwrap`
            // on PATH to its own).
            let dir = acct.installed().parent().unwrap().join("bubblewrap");
            acct.make_dir(&dir);
            let to = dir.join("bwrap");
            std::fs::copy(&unpacked, &to).unwrap();
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
            acct.give(&to);
            to
        })
        .clone(),
    ))
}
