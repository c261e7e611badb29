//! How swarm.yaml becomes the [`Config`] every reader sees: parsed, each
//! role's agent definition resolved (`lineup::definitions`), checked, and
//! the running lineup's changes merged in (`lineup::state`,
//! docs/lineups.md).
//!
//! Apart from `config` (the shape of the file and its checks) so that the
//! config's types do not import the lineup code that reads and edits them:
//! `config` ← `lineup` ← `config_read`, no circle.

use std::path::Path;

use crate::error::{Error, Result};
use crate::protocol::config::{Config, MAX_CONFIG_BYTES};
use crate::protocol::lineup::{definitions, state};

impl Config {
    /// swarm.yaml's text as a checked config (definitions resolved; the
    /// lineup's changes not merged: that needs the project, see `load`).
    /// The problem is [`Error::BadInput`] with the check's own text (src/cli
    /// and the tests read it); `load` names the file around it.
    pub fn parse(text: &str) -> Result<Config> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let mut c = Config::from_text(text).map_err(Error::bad_input)?;
        definitions::resolve(&mut c, text).map_err(Error::bad_input)?;
        c.check().map_err(Error::bad_input)?;
        Ok(c)
    }

    /// Loads `path`; a missing file means every default.
    pub fn load(path: &Path) -> Result<Config> {
        Config::load_with_text(path).map(|(c, _)| c)
    }

    /// [`Config::load`], with the text it read (empty for a missing file):
    /// for a reader that also needs the file's positions (`swarm up`'s
    /// plan) without reading it a second time.
    pub fn load_with_text(path: &Path) -> Result<(Config, String)> {
        let bytes = match crate::fsx::read_bounded(path, MAX_CONFIG_BYTES) {
            Ok(b) => b,
            Err(crate::fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Config::default(), String::new()))
            }
            Err(e) => return Err(Error::bad_file(path, e)),
        };
        let text =
            String::from_utf8(bytes).map_err(|_| Error::bad_file(path, "not valid UTF-8"))?;
        let mut c = Config::parse(&text).map_err(|e| {
            Error::bad_file_hint(
                path,
                e,
                "every key is optional; see the README section \"swarm.yaml\"",
            )
        })?;
        state::merge(&mut c, path)?;
        Ok((c, text))
    }
}
