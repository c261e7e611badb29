//! The loaded swarm: a project with its roles (roles.tsv) and config
//! (swarm.yaml), read once per process and passed down (issue 44.3).
//!
//! Each file is read when first asked for and kept: a command that needs
//! only the config never reads roles.tsv, and each caller sees the error of
//! the file it asked for at the point it asked, exactly as a direct
//! `Roles::load` / `Config::load` there would report it (same file, cause
//! and repair). Invariant: within one `Swarm`, roles.tsv and swarm.yaml are
//! each read at most once (a read that failed is not kept: asking again
//! reads again, and fails the same way). A long-running process (handoffd,
//! the headless supervisor on a lineup change, `swarm mcp` per call) that
//! must see a change makes a new `Swarm`; this type never reloads by itself.
//! It is `Sync`, so the threads of one command share it.

use std::sync::OnceLock;

use crate::error::Result;
use crate::protocol::config::Config;
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;

/// A project, its roles and its config, each read at most once.
#[derive(Debug)]
pub struct Swarm {
    pub project: Project,
    roles: OnceLock<Roles>,
    config: OnceLock<Config>,
}

impl Swarm {
    /// The swarm of `project`; nothing is read yet.
    pub fn new(project: Project) -> Swarm {
        Swarm {
            project,
            roles: OnceLock::new(),
            config: OnceLock::new(),
        }
    }

    /// A swarm whose swarm.yaml was already read (`swarm up`'s plan);
    /// roles.tsv is read on first use.
    pub fn with_config(project: Project, config: Config) -> Swarm {
        Swarm {
            project,
            roles: OnceLock::new(),
            config: OnceLock::from(config),
        }
    }

    /// A swarm whose files were already read.
    pub fn loaded(project: Project, roles: Roles, config: Config) -> Swarm {
        Swarm {
            project,
            roles: OnceLock::from(roles),
            config: OnceLock::from(config),
        }
    }

    /// roles.tsv, read on first use (the errors of [`Roles::load`]).
    pub fn roles(&self) -> Result<&Roles> {
        if let Some(r) = self.roles.get() {
            return Ok(r);
        }
        let r = Roles::load(&self.project.roles_tsv())?;
        Ok(self.roles.get_or_init(|| r))
    }

    /// The project, roles.tsv and swarm.yaml, each read now unless it was
    /// already (roles.tsv first, as a send checks its role first), for a
    /// holder that keeps them (agent::send::Sender).
    pub fn into_parts(self) -> Result<(Project, Roles, Config)> {
        let Swarm {
            project,
            roles,
            config,
        } = self;
        let roles = match roles.into_inner() {
            Some(r) => r,
            None => Roles::load(&project.roles_tsv())?,
        };
        let config = match config.into_inner() {
            Some(c) => c,
            None => Config::load(&project.config_file())?,
        };
        Ok((project, roles, config))
    }

    /// swarm.yaml, read on first use (the errors of [`Config::load`]).
    pub fn config(&self) -> Result<&Config> {
        if let Some(c) = self.config.get() {
            return Ok(c);
        }
        let c = Config::load(&self.project.config_file())?;
        Ok(self.config.get_or_init(|| c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_is_read_once_and_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = Project::new(d.path());
        std::fs::create_dir_all(p.roles_tsv().parent().unwrap()).unwrap();
        std::fs::write(p.roles_tsv(), "a\tmaster\t.\n").unwrap();
        std::fs::write(p.config_file(), "wake: {method: none}\n").unwrap();
        let s = Swarm::new(p.clone());
        assert_eq!(s.roles().unwrap().roles.len(), 1);
        s.config().unwrap();
        // Changed on disk: the loaded swarm keeps what it read.
        std::fs::write(p.roles_tsv(), "a\tmaster\t.\nb\tb\tb\n").unwrap();
        std::fs::write(p.config_file(), ": not yaml [").unwrap();
        assert_eq!(s.roles().unwrap().roles.len(), 1);
        assert!(s.config().is_ok());
        // A new swarm reads again, with Config::load's error.
        let again = Swarm::new(p.clone());
        assert_eq!(again.roles().unwrap().roles.len(), 2);
        assert_eq!(
            again.config().unwrap_err().to_string(),
            Config::load(&p.config_file()).unwrap_err().to_string()
        );
    }
}
