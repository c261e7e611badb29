//! "Allow always", remembered by the swarm (docs/agents.md, "The ACP
//! runtime"): when a person answers a role's permission request with the
//! agent's `allow_always` option, the role may run that tool from then on
//! without asking; `swarm permissions` lists what is allowed and `swarm
//! permissions revoke` takes it back.
//!
//! A tool is the request's `kind` and `title` as the agent names the call
//! (for a command its command line, for an edit the tool and its file):
//! "always" covers the same call again, never a wider one. The title is
//! made by the agent program from the model's input, so a model cannot
//! pass one call off as another; an agent program that lies about its
//! calls needs no permission at all, and only its sandbox holds it.
//!
//! The swarm keeps the memory, not the agent: the agent is handed its
//! `allow_once` option (its `allow_always` only when it offers no other
//! allow), so each later call asks the client again, and a revoke holds
//! from the next call on, whatever session the agent keeps.
//!
//! The invariants: the file, `.swarmforge/acp/grants.json`, is outside
//! every folder a confined agent may write (its worktree, queue folders
//! and launcher folder), and only this module writes it, under its lock,
//! temp + fsync + rename through fsx; it is read bounded, and one it cannot
//! read allows nothing (every request goes to a person) and says why. A
//! grant is made only from a person's answer the client checked
//! ([`super::permission::answered`]). Each grant, each call it allows and
//! each revoke is a journal event (`permission_always`,
//! `permission_allowed`, `permission_revoked`) with who and when.

use serde::{Deserialize, Serialize};

use crate::daemon::journal::{self, Event, Kind};
use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::layout::Project;
use serde_json::Value;

/// The longest grants file read.
const MAX_BYTES: u64 = 1024 * 1024;
/// The most grants kept; an "always" beyond them is handed on as "once".
pub const MAX_GRANTS: usize = 1000;
/// A tool's kind and title, cut (a clarify's option length).
const MAX_KIND: usize = 32;
const MAX_TITLE: usize = 300;

/// One "allow always".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub role: String,
    /// The tool: the request's `kind` and `title`.
    pub kind: String,
    pub title: String,
    /// The person who chose "always", when, and the clarify they answered.
    pub by: String,
    pub at: String,
    pub clarify: String,
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    grants: Vec<Grant>,
}

/// `.swarmforge/acp/grants.json`.
pub fn path(project: &Project) -> std::path::PathBuf {
    project.swarmforge().join("acp/grants.json")
}

/// The tool a permission request names: its kind and title, one line each,
/// cut; None when it names no title (nothing to remember it by).
pub fn tool_of(params: &Value) -> Option<(String, String)> {
    let t = &params["toolCall"];
    let title = super::permission::one_line(t["title"].as_str().unwrap_or(""), MAX_TITLE);
    let kind = super::permission::one_line(t["kind"].as_str().unwrap_or("other"), MAX_KIND);
    (!title.is_empty()).then_some((kind, title))
}

/// Every grant of the project, oldest first (none when there is no file).
pub fn load(project: &Project) -> Result<Vec<Grant>> {
    let p = path(project);
    let bytes = match fsx::read_bounded(&p, MAX_BYTES) {
        Ok(b) => b,
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Vec::new())
        }
        Err(e) => {
            return Err(Error::bad_file_hint(
                &p,
                format!("cannot read the permissions allowed always ({e})"),
                "move it away (nothing is allowed always then: every request asks a person)",
            ))
        }
    };
    serde_json::from_slice::<File>(&bytes)
        .map(|f| f.grants)
        .map_err(|e| {
            Error::bad_file_hint(
                &p,
                format!("not a grants file ({e})"),
                "move it away (nothing is allowed always then: every request asks a person)",
            )
        })
}

/// Rewrites the grants through `change`, under the file's lock.
fn update<T>(project: &Project, change: impl FnOnce(&mut Vec<Grant>) -> Result<T>) -> Result<T> {
    let p = path(project);
    let dir = p.parent().expect("a file in a folder").to_path_buf();
    fsx::ensure_dirs(&[&dir]).map_err(|e| Error::io(&dir, e))?;
    let lock_path = dir.join("grants.lock");
    let _lock = fsx::lock(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
    let mut grants = load(project)?;
    let out = change(&mut grants)?;
    let bytes = serde_json::to_vec_pretty(&File { grants })
        .map_err(|e| Error::internal(format!("grants: {e}")))?;
    fsx::write_file(&p, &bytes).map_err(|e| Error::io(&p, e))?;
    Ok(out)
}

/// The grant that allows `role` the tool (`kind`, `title`), if any.
pub fn find(project: &Project, role: &str, kind: &str, title: &str) -> Result<Option<Grant>> {
    Ok(load(project)?
        .into_iter()
        .find(|g| g.role == role && g.kind == kind && g.title == title))
}

/// Remembers `g` (a person's "always"), journaled; false when it was
/// already there or the file is full.
pub fn add(project: &Project, g: &Grant) -> Result<bool> {
    let added = update(project, |gs| {
        let fresh = !gs
            .iter()
            .any(|x| x.role == g.role && x.kind == g.kind && x.title == g.title);
        let room = gs.len() < MAX_GRANTS;
        if fresh && room {
            gs.push(g.clone());
        }
        Ok(fresh && room)
    })?;
    if added {
        journal::record_outside(
            project,
            &event(Kind::PermissionAlways, g).reason(format!(
                "{} allowed {} always: {}: {}",
                g.by, g.role, g.kind, g.title
            )),
        );
    }
    Ok(added)
}

/// A call `g` allowed without asking, journaled.
pub fn used(project: &Project, g: &Grant) {
    journal::record_outside(
        project,
        &event(Kind::PermissionAllowed, g).reason(format!(
            "allowed without asking: {} allowed {} always at {}: {}: {}",
            g.by, g.role, g.at, g.kind, g.title
        )),
    );
}

fn event(kind: Kind, g: &Grant) -> Event {
    let mut e = Event::new(kind).recipient(&g.role);
    e.id = Some(g.clarify.clone());
    e.from = Some(g.by.clone());
    e
}

/// `swarm permissions revoke <role> <n>`: takes back the `n`-th grant of
/// `role` (as [`text`] numbers them), journaled with `by` (the person).
pub fn revoke(project: &Project, role: &str, n: usize, by: &str) -> Result<Grant> {
    let g = update(project, |gs| {
        let at: Vec<usize> = (0..gs.len()).filter(|i| gs[*i].role == role).collect();
        match n.checked_sub(1).and_then(|i| at.get(i)) {
            Some(i) => Ok(gs.remove(*i)),
            None => Err(Error::not_found(format!(
                "role '{}' has no permission {n} allowed always ({} in all)\n  hint: `swarm permissions` lists them, numbered per role",
                crate::text::escape(role),
                at.len()
            ))),
        }
    })?;
    let mut e = event(Kind::PermissionRevoked, &g).reason(format!(
        "{by} revoked: {} allowed {} always at {}: {}: {}",
        g.by, g.role, g.at, g.kind, g.title
    ));
    e.from = Some(by.to_string());
    journal::record_outside(project, &e);
    Ok(g)
}

/// `swarm permissions revoke`, as the caller: only a person may (an agent
/// is refused, `PERSON_ONLY`), named by `as_person` (a human role) or, when
/// the swarm has one, its first human role.
pub fn revoke_as_caller(
    project: &Project,
    role: &str,
    n: usize,
    as_person: Option<&str>,
) -> Result<Grant> {
    crate::agent::caller::Caller::of(project)?.require_person("swarm permissions revoke")?;
    let roles = crate::protocol::roles::Roles::load(&project.roles_tsv())?;
    let person = match as_person {
        Some(p) if roles.find(p).is_some_and(|r| r.is_human()) => p.to_string(),
        Some(p) => {
            return Err(Error::bad_input(format!(
                "--as {}: not a human role of {}",
                crate::text::escape(p),
                project.roles_tsv().display()
            )))
        }
        None => roles
            .roles
            .iter()
            .find(|r| r.is_human())
            .map(|r| r.name.clone())
            .unwrap_or_else(|| "a person".to_string()),
    };
    revoke(project, role, n, &person)
}

/// The `swarm permissions` text: each grant numbered per role.
pub fn text(grants: &[Grant]) -> String {
    if grants.is_empty() {
        return "no permission is allowed always (a person's \"always\" on an ACP role's request adds one)\n".into();
    }
    let mut out = String::new();
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for g in grants {
        let n = match seen.iter_mut().find(|(r, _)| *r == g.role) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                seen.push((&g.role, 1));
                1
            }
        };
        out.push_str(&format!(
            "{} {n}  {}: {}  allowed by {} at {} (clarify {})\n",
            crate::text::escape(&g.role),
            crate::text::escape(&g.kind),
            crate::text::escape(&g.title),
            crate::text::escape(&g.by),
            g.at,
            g.clarify
        ));
    }
    out
}

/// A grant made now by `by` for `role`'s tool, from clarify `clarify`.
pub fn new_grant(role: &str, tool: &(String, String), by: &str, clarify: &str) -> Grant {
    Grant {
        role: role.to_string(),
        kind: tool.0.clone(),
        title: tool.1.clone(),
        by: by.to_string(),
        at: clock::iso_now(),
        clarify: clarify.to_string(),
    }
}
