//! `swarm attach <role>`: where a person answers what an agent's pane waits
//! for (docs/agents.md, "When an agent waits for a person"). The role's
//! tmux session on the swarm's private socket, checked to exist; and, for
//! `--choose`, the keys of one option of the prompt the pane shows right
//! now, never typed into a pane that does not show that prompt.

use std::path::PathBuf;

use crate::daemon::pane;
use crate::error::{Error, Result};
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::sys::tmux;

/// A role's pane: the socket and the session to attach to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub socket: PathBuf,
    pub session: String,
}

impl Target {
    /// `tmux -S <socket> attach -t =<session>` as words.
    pub fn command(&self) -> Vec<String> {
        vec![
            "tmux".into(),
            "-S".into(),
            self.socket.to_string_lossy().into_owned(),
            "attach-session".into(),
            "-t".into(),
            format!("={}", self.session),
        ]
    }
}

/// The running pane of `role`, or why there is none.
pub fn target(project: &Project, role: &str) -> Result<Target> {
    let roles = Roles::load(&project.roles_tsv())?;
    let Some(r) = roles.roles.iter().find(|r| r.name == role) else {
        let names: Vec<&str> = roles.roles.iter().map(|r| r.name.as_str()).collect();
        return Err(Error::not_found(format!(
            "no role {role:?} in {}; roles: {}",
            project.roles_tsv().display(),
            names.join(", ")
        )));
    };
    if r.is_remote() || r.session.is_empty() {
        return Err(Error::not_found(format!(
            "role {role} has no tmux session on this host"
        )));
    }
    let socket = crate::protocol::tmux_socket::read(project)
        .socket(project)?
        .ok_or_else(|| {
            Error::not_found(format!(
                "no swarm runs in tmux for {} ({} is missing)\n  hint: `swarm up` starts one; a `--no-tmux` swarm has no panes",
                project.root.display(),
                project.tmux_socket().display()
            ))
        })?;
    if !tmux::ok(&socket, &["has-session", "-t", &format!("={}", r.session)]) {
        return Err(Error::not_found(format!(
            "role {role}'s tmux session {} is gone (socket {})\n  hint: `swarm status` shows the agents; `swarm up` starts missing sessions",
            r.session,
            socket.display()
        )));
    }
    Ok(Target {
        socket,
        session: r.session.clone(),
    })
}

/// Chooses option `n` (1-based) of the prompt `role`'s pane shows now:
/// sends exactly that option's keys. Refused (nothing typed) when the pane
/// waits for nothing or the option does not exist. Returns the prompt and
/// the option chosen.
pub fn choose(project: &Project, role: &str, n: usize) -> Result<(pane::Prompt, pane::Choice)> {
    let t = target(project, role)?;
    let p = pane::look(&t.socket, &t.session)
        .map_err(|e| {
            Error::process(format!(
                "cannot read role {role}'s pane: {e}; nothing was typed\n  hint: `swarm attach {role}` shows it"
            ))
        })?
        .ok_or_else(|| {
            Error::conflict(format!(
                "role {role}'s pane waits for no answer now; nothing was typed\n  hint: `swarm attach {role}` shows it"
            ))
        })?;
    let Some(c) = n.checked_sub(1).and_then(|i| p.options.get(i)).cloned() else {
        return Err(Error::bad_input(format!(
            "role {role}'s pane shows \"{}\" with {} option(s) ({}); there is no option {n}; nothing was typed",
            p.text,
            p.options.len(),
            pane::numbered_options(&p.options)
        )));
    };
    let target = format!("={}:", t.session);
    for key in &c.keys {
        let r =
            tmux::call(&t.socket, &["send-keys", "-t", &target, key]).map_err(Error::process)?;
        if !r.ok {
            return Err(Error::process(format!(
                "tmux send-keys {key} to {} failed: {}",
                t.session,
                r.stderr.trim()
            )));
        }
    }
    Ok((p, c))
}
