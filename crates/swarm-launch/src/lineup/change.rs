//! `swarm role add` and `swarm role remove`: the lineup of a running swarm
//! changes, under the lineup lock (state.rs), with nothing lost
//! (docs/lineups.md).
//!
//! Remove, in this order: (1) the role is marked leaving and the daemon
//! confirms it refuses new mail for it; (2) its agent stops; (3) every item
//! waiting in its inbox (new and in process) goes back: a `note` from the
//! role to the item's sender through the ordinary send path (`in_reply_to`
//! the item), then the item is completed as failed with the reason, so it
//! stays on record and `swarm audit --check` sees it closed; (4) once the
//! daemon delivered those notes, the role leaves roles.tsv and the peers'
//! primers are rewritten. Its worktree stays (its branch is work).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::agent::queue::{Inbox, Item, Ready};
use crate::daemon::journal::{record_outside, Event, Kind};
use crate::error::{Error, IoContext, Result, Token};
use crate::fsx;
use crate::launch::plan::{self, Plan, PlannedRole, Source};
use crate::launch::process::lock_holder;
use crate::launch::{init, sessions, shims};
use crate::lineup::definitions;
use crate::lineup::state::{self, Retired, Seats};
use crate::protocol::config::{Config, RoleConfig};
use crate::protocol::header::names;
use crate::protocol::launch_files::{agent_pid_file, supervisor_pid_file};
use crate::protocol::layout::Project;

/// How long `swarm role` waits for the daemon, the supervisor or a delivery.
const WAIT: Duration = Duration::from_secs(30);

/// What `swarm role add` is asked for.
#[derive(Clone, Debug, Default)]
pub struct AddRequest {
    pub name: String,
    /// An agent definition (definitions.rs).
    pub from: Option<String>,
    /// A command line, a preset (`claude`, …) or `human`.
    pub agent: Option<String>,
    /// Default: a worktree of the role's own name.
    pub worktree: Option<String>,
    pub description: Option<String>,
    pub model: Option<String>,
    /// `tmux` or `headless`.
    pub runtime: Option<String>,
}

fn refused(detail: String) -> Error {
    Error::refused(Token::LineupRefused, detail, vec![])
}

/// The plan, refused when the roles do not come from swarm.yaml.
fn yaml_plan(project: &Project) -> Result<Plan> {
    let plan = Plan::load(&project.root)?;
    if let Source::SwarmforgeConf(p) = &plan.source {
        return Err(Error::conflict(format!(
            "{}: the roles come from {}, which `swarm role` does not change\n  hint: move the roles to a `roles:` list in {}",
            project.root.display(),
            p.display(),
            project.config_file().display()
        )));
    }
    Ok(plan)
}

/// The role `req` asks for, before validation.
fn role_config(project: &Project, req: &AddRequest) -> Result<RoleConfig> {
    let mut own = Map::new();
    own.insert("name".into(), Value::String(req.name.clone()));
    let worktree = req.worktree.clone().unwrap_or_else(|| req.name.clone());
    own.insert("worktree".into(), Value::String(worktree));
    for (k, v) in [
        ("agent", &req.agent),
        ("description", &req.description),
        ("model", &req.model),
        ("runtime", &req.runtime),
    ] {
        if let Some(v) = v {
            own.insert(k.into(), Value::String(v.clone()));
        }
    }
    let bad = |e: serde_json::Error| {
        Error::bad_input(format!(
            "swarm role add {}: {e}",
            crate::text::escape(&req.name)
        ))
    };
    match &req.from {
        Some(d) => {
            let def = definitions::lookup(project, d)?;
            definitions::with_definition(&def, own).map_err(bad)
        }
        None if req.agent.is_none() => Err(Error::bad_input(
            "swarm role add: give --from <definition> or --agent <command>\n  hint: `swarm agents` lists the definitions",
        )),
        None => serde_json::from_value(Value::Object(own)).map_err(bad),
    }
}

/// Adds a role to the running swarm: worktree, folders, roles.tsv, the
/// primers, then its agent (a tmux session, or the headless supervisor's).
pub fn add(project: &Project, req: &AddRequest, say: &mut dyn FnMut(&str)) -> Result<()> {
    yaml_plan(project)?;
    // Refused before anything changes when the pointer cannot be believed.
    tmux_socket(project)?;
    let _lock = state::lock(project)?;
    let role = new_role(project, req)?;
    let (plan, generation) = take_seat(project, &role)?;
    for c in init::init(&plan)?.changes {
        say(&c);
    }
    if plan
        .roles
        .iter()
        .any(|r| r.name == role.name && !r.is_human())
        && plan.config.reservations == crate::protocol::config::ReservationsMode::Guard
    {
        crate::launch::up::install_guard(project, say)?;
    }
    for note in sessions::write_prompts(&plan)? {
        say(&note);
    }
    for p in crate::launch::role_mcp::write_all(&plan, &shims::own_bin_dir()?.join("swarm"))? {
        say(&format!("MCP configuration: {}", p.display()));
    }
    wait_for_daemon(project, generation)?;
    record_outside(
        project,
        &Event::new(Kind::SeatAdded)
            .recipient(&role.name)
            .reason(match &role.from {
                Some(d) => format!("from definition {d}"),
                None => format!("agent {}", role.agent),
            }),
    );
    let Some(r) = plan.roles.iter().find(|r| r.name == role.name) else {
        say(&format!(
            "{}: works on another host; its host starts it",
            role.name
        ));
        return Ok(());
    };
    start(&plan, r, say)
}

/// The role `req` asks for, refused when the lineup has one of its name
/// or the lineup with it would not be valid.
fn new_role(project: &Project, req: &AddRequest) -> Result<RoleConfig> {
    let config = Config::load(&project.config_file())?;
    if config.role(&req.name).is_some() {
        return Err(refused(format!(
            "role {} is already in the lineup",
            req.name
        )));
    }
    let role = role_config(project, req)?;
    let mut roles = config.roles.clone();
    roles.push(role.clone());
    // The one validator of role names, agents and worktrees.
    plan::validate_yaml_roles(&roles, "", Path::new("swarm role add"))?;
    Ok(role)
}

/// Seats `role` in the lineup file and returns the plan with it and the
/// lineup's new generation; when its program is not installed (as `swarm
/// up` checks), the lineup file is put back as it was and nothing changes.
fn take_seat(project: &Project, role: &RoleConfig) -> Result<(Plan, u64)> {
    let mut seats = state::load(project)?;
    let before = seats.clone();
    let had_file = state::file(project).exists();
    seats.added.retain(|r| r.name != role.name);
    seats.added.push(role.clone());
    seats.removed.retain(|r| r.name != role.name);
    state::save(project, &mut seats)?;
    let plan = Plan::load(&project.root).and_then(|plan| {
        let mut one = plan.clone();
        one.roles.retain(|r| r.name == role.name);
        crate::launch::command::check_programs(&one, false)?;
        Ok(plan)
    });
    match plan {
        Ok(p) => Ok((p, seats.generation)),
        Err(e) => {
            if had_file {
                let mut back = Seats {
                    generation: seats.generation,
                    ..before
                };
                state::save(project, &mut back)?;
            } else {
                let f = state::file(project);
                fsx::remove_file(&f).at(&f)?;
            }
            Err(e)
        }
    }
}

/// The swarm's tmux socket, if it runs in tmux; a pointer that cannot be
/// believed refuses the change (protocol::tmux_socket).
fn tmux_socket(project: &Project) -> Result<Option<PathBuf>> {
    crate::protocol::tmux_socket::read(project).socket(project)
}

fn start(plan: &Plan, r: &PlannedRole, say: &mut dyn FnMut(&str)) -> Result<()> {
    let project = &plan.project;
    if r.is_human() {
        say(&format!(
            "{}: a person works this role; not started",
            r.name
        ));
        return Ok(());
    }
    if let Some(sock) = tmux_socket(project)? {
        let mut one = plan.clone();
        one.roles = vec![r.clone()];
        sessions::start_sessions(&one, &sock, Duration::ZERO, say)?;
        sessions::write_session_files(plan, &sock)?;
        say(&format!(
            "{}: started; attach: tmux -S {} attach -t {}",
            r.name,
            sock.display(),
            r.session
        ));
    } else if let Some(pid) = lock_holder(&supervisor_pid_file(project)) {
        say(&format!(
            "{}: the headless supervisor (pid {pid}) starts its agent",
            r.name
        ));
    } else {
        say(&format!(
            "{}: no swarm runs here; `swarm up` starts its agent",
            r.name
        ));
    }
    Ok(())
}

/// Waits until the daemon acts on `generation` (no daemon: nothing to wait
/// for).
fn wait_for_daemon(project: &Project, generation: u64) -> Result<()> {
    wait_until(project, "the daemon to read the new lineup", || {
        lock_holder(&project.pid_file()).is_none() || state::acknowledged(project) >= generation
    })
}

fn wait_until(project: &Project, what: &str, mut done: impl FnMut() -> bool) -> Result<()> {
    let end = Instant::now() + WAIT;
    while !done() {
        if Instant::now() >= end {
            return Err(Error::process(format!(
                "timed out after {}s waiting for {what}\n  hint: see {}; run the command again to finish",
                WAIT.as_secs(),
                project.log_file().display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// What `swarm role remove` did.
#[derive(Clone, Debug, Default)]
pub struct Removed {
    /// Items sent back to their senders.
    pub returned: usize,
    pub worktree: PathBuf,
}

/// Removes `name` from the running swarm; its waiting mail goes back to its
/// senders with `reason`.
pub fn remove(
    project: &Project,
    name: &str,
    reason: &str,
    say: &mut dyn FnMut(&str),
) -> Result<Removed> {
    crate::agent::queue::check_failed_reason(reason)?;
    let plan = yaml_plan(project)?;
    tmux_socket(project)?;
    let _lock = state::lock(project)?;
    let config = Config::load(&project.config_file())?;
    let mut seats = state::load(project)?;
    let r = removable(project, &plan, &config, &seats, name)?;
    // The returned mail needs a daemon to reach its senders: without one
    // running, one runs for the time of the removal.
    let mut own_daemon = None;
    if lock_holder(&project.pid_file()).is_none()
        && crate::launch::supervisor::pending(&r.worktree())
    {
        let (pid, child) = crate::launch::process::start_daemon(project, say)?;
        say(&format!(
            "handoffd started (pid {pid}) to deliver the returned mail"
        ));
        own_daemon = Some(child);
    }
    let result = retire(project, &config, &mut seats, &r, reason, say);
    if let Some(mut child) = own_daemon {
        let stopped = crate::daemon::control::stop(project, crate::daemon::control::GRACE);
        let _ = child.wait();
        stopped?;
    }
    let returned = result?;
    record_outside(
        project,
        &Event::new(Kind::SeatRemoved)
            .recipient(name)
            .reason(format!("{returned} waiting item(s) returned: {reason}")),
    );
    Ok(Removed {
        returned,
        worktree: r.worktree_path.clone(),
    })
}

/// The role `name` of this host's plan, if it may leave: an agent's (a
/// person leaves by an edit of swarm.yaml), not the last agent, with a
/// worktree (and so an inbox) of its own.
fn removable(
    project: &Project,
    plan: &Plan,
    config: &Config,
    seats: &Seats,
    name: &str,
) -> Result<PlannedRole> {
    let Some(cfg) = config.role(name) else {
        if let Some(why) = seats.refusal(name) {
            return Err(refused(why));
        }
        return Err(Error::not_found(format!(
            "unknown role {}\n  hint: the roles: {}",
            crate::text::escape(name),
            config
                .roles
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    if cfg.is_human() {
        return Err(refused(format!(
            "role {name} is a person's; a person leaves a swarm by an edit of {}, not by a command an agent could run",
            project.config_file().display()
        )));
    }
    if !config.roles.iter().any(|r| r.name != name && !r.is_human()) {
        return Err(refused(format!(
            "role {name} is the last agent role; a swarm without one does nothing (`swarm down` stops it)"
        )));
    }
    let Some(r) = plan.roles.iter().find(|r| r.name == name).cloned() else {
        return Err(refused(format!(
            "role {name} works on another host; remove it there"
        )));
    };
    if let Some(o) = plan
        .roles
        .iter()
        .find(|o| o.name != name && o.worktree_path == r.worktree_path)
    {
        return Err(refused(format!(
            "role {name} shares its worktree (and so its inbox) with role {}; its waiting mail cannot be told apart\n  hint: give it a worktree of its own in {} first",
            o.name,
            project.config_file().display()
        )));
    }
    Ok(r)
}

/// Steps 1 to 4 of a removal (see the module doc); returns how many items
/// went back.
fn retire(
    project: &Project,
    config: &Config,
    seats: &mut Seats,
    r: &PlannedRole,
    reason: &str,
    say: &mut dyn FnMut(&str),
) -> Result<usize> {
    let name = r.name.as_str();
    if !seats.is_leaving(name) {
        seats.leaving.push(name.to_string());
        state::save(project, seats)?;
    }
    wait_for_daemon(project, seats.generation)?;
    stop(project, r, seats.generation, say)?;
    let returned = return_mail(project, config, r, reason, say)?;
    let outbox = r.worktree().outbox();
    wait_until(project, "the daemon to deliver the returned mail", || {
        lock_holder(&project.pid_file()).is_none()
            || crate::protocol::trail::handoff_names(&outbox).is_ok_and(|v| v.is_empty())
    })?;
    seats.leaving.retain(|l| l != name);
    seats.added.retain(|a| a.name != name);
    seats.removed.retain(|x| x.name != name);
    seats.removed.push(Retired {
        name: name.to_string(),
        worktree_name: r.worktree_name.clone(),
        worktree_path: r.worktree_path.clone(),
        at: crate::protocol::clock::iso_now(),
    });
    state::save(project, seats)?;
    let plan = Plan::load(&project.root)?;
    init::init(&plan)?;
    // Its worktree stays, an ordinary checkout of its branch again (no
    // agent of it runs confined any more), so removing the folder later
    // cannot take the branch with it (launch/role_branch.rs).
    if r.has_own_checkout()
        && !plan
            .roles
            .iter()
            .any(|o| o.worktree_path == r.worktree_path)
    {
        let branch = crate::launch::role_branch::branch_name(&r.worktree_name);
        if let Some(note) =
            crate::launch::role_branch::release(&project.root, &r.worktree_path, &branch)?
        {
            say(&note);
        }
    }
    for note in sessions::write_prompts(&plan)? {
        say(&note);
    }
    if let Some(sock) = tmux_socket(project)? {
        sessions::write_session_files(&plan, &sock)?;
    }
    wait_for_daemon(project, seats.generation)?;
    Ok(returned)
}

/// Stops the role's agent: its tmux session, or (headless) the supervisor
/// stops it once it read `generation`.
fn stop(
    project: &Project,
    r: &PlannedRole,
    generation: u64,
    say: &mut dyn FnMut(&str),
) -> Result<()> {
    if let Some(sock) = tmux_socket(project)? {
        if sessions::stop_session(&sock, &r.session) {
            say(&format!("{}: session {} stopped", r.name, r.session));
        }
    }
    if lock_holder(&supervisor_pid_file(project)).is_some() {
        let pid_file = agent_pid_file(project, &r.name);
        wait_until(project, "the headless supervisor to stop the agent", || {
            lock_holder(&supervisor_pid_file(project)).is_none()
                || (state::supervised(project) >= generation && !pid_file.exists())
        })?;
    }
    Ok(())
}

/// Sends every waiting item of `r` back; returns how many.
fn return_mail(
    project: &Project,
    config: &Config,
    r: &PlannedRole,
    reason: &str,
    say: &mut dyn FnMut(&str),
) -> Result<usize> {
    let wt = r.worktree();
    let inbox = Inbox::new(&wt, config.limits.max_file_bytes);
    let sender = crate::agent::send::Sender::as_role(project, &r.name)?;
    let mut n = 0;
    loop {
        let items: Vec<Item> = match inbox.ready(r.mode)? {
            Ready::NoTask | Ready::MailWaiting => break,
            Ready::Task { item, .. } => vec![item],
            Ready::Batch { items, .. } => items,
        };
        for item in &items {
            if let Some(to) = notify(&sender, config, item, &r.name) {
                say(&format!(
                    "returned {} to {to}",
                    item.msg.id().unwrap_or_default()
                ));
            }
        }
        inbox.done_announcing(r.mode, Some(reason))?;
        n += items.len();
    }
    Ok(n)
}

/// The `note` back to an item's sender (none for a sender that is not a
/// role of the lineup any more, or the role itself).
fn notify(
    s: &crate::agent::send::Sender,
    config: &Config,
    item: &Item,
    role: &str,
) -> Option<String> {
    let from = item.msg.sender()?;
    let id = item.msg.id()?;
    if from == role || config.role(from).is_none() || config.seats.is_leaving(from) {
        return None;
    }
    let mut message = format!("returned: {role} left the lineup before doing it");
    if message.chars().count() > crate::protocol::types::MAX_LINE_CHARS {
        message = "returned: the role left the lineup before doing it".into();
    }
    let text = format!(
        "{}: {}\n{}: {from}\n{}: {}\n{}: {id}\n{}: {message}\n",
        names::TYPE,
        crate::protocol::types::NOTE.name,
        names::TO,
        names::PRIORITY,
        item.priority(),
        names::IN_REPLY_TO,
        names::MESSAGE,
    );
    let draft = crate::protocol::draft::parse(&text);
    match crate::agent::send::submit(s, &draft, "(returned mail)") {
        Ok(_) => Some(from.to_string()),
        Err(e) => {
            eprintln!("warning: could not tell {from} that {id} was returned: {e}");
            None
        }
    }
}
