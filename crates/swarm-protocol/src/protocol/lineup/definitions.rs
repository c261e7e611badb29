//! The library of agent definitions: `agents:` in swarm.yaml, then one file
//! per definition in the user's folder
//! (`$XDG_CONFIG_HOME/swarm-handoff/agents/<name>.yaml`, default
//! `~/.config/…`). A definition holds role keys (agent, model, runtime,
//! permission, description, prompt, …); a role with `from: <name>` gets
//! them, and the keys the role writes itself win (docs/lineups.md).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::protocol::config::{Config, RoleConfig, MAX_CONFIG_BYTES};
use crate::protocol::grammar;
use crate::protocol::layout::Project;

/// Where a definition was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    SwarmYaml,
    UserFile(PathBuf),
}

/// One definition: its keys as written, and the role they make.
#[derive(Clone, Debug)]
pub struct Definition {
    pub name: String,
    pub origin: Origin,
    keys: Map<String, Value>,
    pub role: RoleConfig,
}

/// The swarm.yaml key naming a role's definition.
const FROM_KEY: &str = "from";

/// Keys a definition does not pass on: a role names itself.
const OWN_KEYS: [&str; 2] = ["name", FROM_KEY];

/// The per-user folder of definitions.
pub fn user_dir() -> Option<PathBuf> {
    let set = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    set("XDG_CONFIG_HOME")
        .or_else(|| set("HOME").map(|h| h.join(".config")))
        .map(|d| d.join("swarm-handoff").join("agents"))
}

/// Why an agent definition, or a role's `from:`, cannot be used: each
/// names the definition (and the file or role it is in), the cause, and
/// where the repair goes.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    /// The YAML does not parse (the parser's own text).
    #[error("{0}")]
    Yaml(String),
    #[error("agent definition '{name}' uses `from:`; a definition cannot start from another")]
    StartsFrom { name: String },
    #[error("agent definition '{name}': {source}")]
    Keys {
        name: String,
        source: serde_json::Error,
    },
    #[error(
        "agents: invalid definition name '{}' (letters, digits and '-', at most 64 characters)",
        crate::text::escape(.0)
    )]
    BadName(String),
    /// A user folder's file, and what is wrong with it.
    #[error("{}: {why}", path.display())]
    File { path: PathBuf, why: String },
    #[error(
        "unknown agent definition '{}': searched `agents:` in swarm.yaml and {}\n  hint: add it to `agents:` in swarm.yaml or write {}; `swarm agents` lists the library",
        crate::text::escape(name),
        dir.as_ref().map_or("no user folder (neither XDG_CONFIG_HOME nor HOME is set)".into(), |d| d.display().to_string()),
        dir.as_ref().map_or("<user folder>/<name>.yaml".into(), |d| d.join(format!("{name}.yaml")).display().to_string())
    )]
    Unknown { name: String, dir: Option<PathBuf> },
    /// A role's `from:` names a definition that cannot be used.
    #[error("role '{}': {source}", crate::text::escape(role))]
    Role {
        role: String,
        source: Box<DefinitionError>,
    },
    /// A role's own keys over its definition's do not make a role.
    #[error("role '{}' (from: {from}): {why}", crate::text::escape(role))]
    RoleKeys {
        role: String,
        from: String,
        why: serde_json::Error,
    },
}

fn yaml_doc(text: &str) -> std::result::Result<Value, DefinitionError> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_saphyr::from_str::<Value>(text).map_err(|e| DefinitionError::Yaml(e.to_string()))
}

fn mapping(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

fn make(
    name: &str,
    origin: Origin,
    keys: Map<String, Value>,
) -> std::result::Result<Definition, DefinitionError> {
    if keys.get(FROM_KEY).is_some_and(|v| !v.is_null()) {
        return Err(DefinitionError::StartsFrom {
            name: name.to_string(),
        });
    }
    let mut role: RoleConfig =
        serde_json::from_value(Value::Object(keys.clone())).map_err(|source| {
            DefinitionError::Keys {
                name: name.to_string(),
                source,
            }
        })?;
    role.name = name.to_string();
    Ok(Definition {
        name: name.to_string(),
        origin,
        keys,
        role,
    })
}

/// swarm.yaml's `agents:`, in file order.
fn from_yaml(doc: &Value) -> std::result::Result<Vec<Definition>, DefinitionError> {
    let mut out = Vec::new();
    for v in doc
        .get("agents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let keys = mapping(Some(v));
        let name = keys
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !grammar::valid_role(&name) {
            return Err(DefinitionError::BadName(name));
        }
        out.push(make(&name, Origin::SwarmYaml, keys)?);
    }
    Ok(out)
}

/// The user folder's `<name>.yaml`, if there is one.
fn from_user_file(
    dir: &Path,
    name: &str,
) -> std::result::Result<Option<Definition>, DefinitionError> {
    let path = dir.join(format!("{name}.yaml"));
    let file = |why: String| DefinitionError::File {
        path: path.clone(),
        why,
    };
    let bytes = match crate::fsx::read_bounded(&path, MAX_CONFIG_BYTES) {
        Ok(b) => b,
        Err(crate::fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(file(e.to_string())),
    };
    let text = String::from_utf8(bytes).map_err(|_| file("not valid UTF-8".into()))?;
    let keys = mapping(Some(&yaml_doc(&text).map_err(|e| file(e.to_string()))?));
    if let Some(n) = keys.get("name").and_then(Value::as_str) {
        if n != name {
            return Err(file(format!(
                "names the definition '{}'; a file holds the definition of its own name",
                crate::text::escape(n)
            )));
        }
    }
    make(name, Origin::UserFile(path.clone()), keys)
        .map(Some)
        .map_err(|e| file(e.to_string()))
}

/// The definition `name`: swarm.yaml's `agents:` first, then the user folder.
fn find_in(doc: &Value, name: &str) -> std::result::Result<Definition, DefinitionError> {
    if let Some(d) = from_yaml(doc)?.into_iter().find(|d| d.name == name) {
        return Ok(d);
    }
    let dir = user_dir();
    if grammar::valid_role(name) {
        if let Some(dir) = &dir {
            if let Some(d) = from_user_file(dir, name)? {
                return Ok(d);
            }
        }
    }
    Err(DefinitionError::Unknown {
        name: name.to_string(),
        dir,
    })
}

/// Gives every role with `from:` its definition's keys (the role's own
/// keys win); `text` is the swarm.yaml the config was read from.
pub fn resolve(c: &mut Config, text: &str) -> std::result::Result<(), DefinitionError> {
    if c.roles.iter().all(|r| r.from.is_none()) {
        from_yaml(&yaml_doc(text)?)?;
        return Ok(());
    }
    let doc = yaml_doc(text)?;
    let written = doc
        .get("roles")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, r) in c.roles.iter_mut().enumerate() {
        let Some(from) = r.from.clone() else {
            continue;
        };
        let def = find_in(&doc, &from).map_err(|e| DefinitionError::Role {
            role: r.name.clone(),
            source: Box::new(e),
        })?;
        *r = with_definition(&def, mapping(written.get(i))).map_err(|why| {
            DefinitionError::RoleKeys {
                role: r.name.clone(),
                from: from.clone(),
                why,
            }
        })?;
    }
    Ok(())
}

/// A role from `def`, with `own` (the role's keys) over the definition's.
pub fn with_definition(
    def: &Definition,
    own: Map<String, Value>,
) -> std::result::Result<RoleConfig, serde_json::Error> {
    let mut keys: Map<String, Value> = def
        .keys
        .iter()
        .filter(|(k, _)| !OWN_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    keys.extend(own);
    keys.insert(FROM_KEY.into(), Value::String(def.name.clone()));
    serde_json::from_value(Value::Object(keys))
}

fn read_yaml(project: &Project) -> Result<Value> {
    let path = project.config_file();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io(&path, e)),
    };
    yaml_doc(&text).map_err(|e| Error::bad_file(&path, e))
}

/// The definition `name` for `project` (`swarm role add --from`).
pub fn lookup(project: &Project, name: &str) -> Result<Definition> {
    let doc = read_yaml(project)?;
    find_in(&doc, name).map_err(Error::env)
}

/// The whole library: swarm.yaml's definitions, then the user folder's
/// (a user file shadowed by a swarm.yaml definition of its name is left
/// out); a file that does not read is reported in `problems`.
pub fn list(project: &Project) -> Result<(Vec<Definition>, Vec<String>)> {
    let doc = read_yaml(project)?;
    let mut defs =
        from_yaml(&doc).map_err(|e| Error::bad_file(project.config_file(), e.to_string()))?;
    let mut problems = Vec::new();
    if let Some(dir) = user_dir() {
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".yaml")
                    .map(str::to_string)
            })
            .filter(|n| grammar::valid_role(n))
            .collect();
        names.sort();
        for n in names {
            if defs.iter().any(|d| d.name == n) {
                continue;
            }
            match from_user_file(&dir, &n) {
                Ok(Some(d)) => defs.push(d),
                Ok(None) => {}
                Err(e) => problems.push(e.to_string()),
            }
        }
    }
    Ok((defs, problems))
}
