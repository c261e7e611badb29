//! `swarm init`: turn a directory into a swarm project: the git repository,
//! the role worktrees, every state folder, `roles.tsv` and the worktrees'
//! `project-root` pointers. Everything is create-if-missing or
//! write-if-different, so a second run changes nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::launch::plan::{Plan, PlannedRole};
use crate::launch::repo::{add_excludes, git, git_with, write_if_changed};
use crate::protocol::layout::Worktree;

/// What `init` did, one line per change (empty: nothing changed).
#[derive(Clone, Debug, Default)]
pub struct InitReport {
    pub changes: Vec<String>,
}

fn git_ok(dir: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// `-c user.name=… -c user.email=…` when git has no identity of its own
/// (a fresh machine, or tests without HOME), so the first commit works.
fn identity_args(root: &Path) -> Vec<String> {
    let mut v = Vec::new();
    let has = |key: &str, env: &str| {
        std::env::var_os(env).is_some_and(|v| !v.is_empty())
            || git(root, &["config", key]).is_ok_and(|s| !s.is_empty())
    };
    if !has("user.name", "GIT_AUTHOR_NAME") {
        v.extend(["-c".to_string(), "user.name=swarm".to_string()]);
    }
    if !has("user.email", "GIT_AUTHOR_EMAIL") {
        v.extend(["-c".to_string(), "user.email=swarm@localhost".to_string()]);
    }
    v
}

/// Creates the missing directories among `dirs`; returns how many.
fn ensure_missing(dirs: &[PathBuf]) -> Result<usize> {
    let missing: Vec<&PathBuf> = dirs.iter().filter(|d| !d.is_dir()).collect();
    for d in &missing {
        fsx::ensure_dirs(&[d]).at(d)?;
    }
    Ok(missing.len())
}

const EXCLUDES: [&str; 2] = [".swarmforge/", ".worktrees/"];

fn ensure_excludes(root: &Path, report: &mut InitReport) -> Result<()> {
    if let Some(change) = add_excludes(root, &EXCLUDES)? {
        report.changes.push(change);
    }
    Ok(())
}

fn ensure_repo(root: &Path, report: &mut InitReport) -> Result<()> {
    if !root.join(".git").exists() {
        git(root, &["init", "-q", "--initial-branch=master"])?;
        report
            .changes
            .push(format!("created a git repository in {}", root.display()));
    }
    // Excluded before the first commit, so state never lands in history.
    ensure_excludes(root, report)?;
    if !git_ok(root, &["rev-parse", "--verify", "-q", "HEAD"]) {
        let id = identity_args(root);
        git(root, &["add", "-A"])?;
        git_with(
            root,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "Initial swarmforge repository",
            ],
            &id,
        )?;
        report
            .changes
            .push("made the first commit (Initial swarmforge repository)".into());
    }
    Ok(())
}

fn ensure_worktree(root: &Path, r: &PlannedRole, report: &mut InitReport) -> Result<()> {
    let path = &r.worktree_path;
    if path.join(".git").exists() {
        return Ok(());
    }
    let parent = root.join(".worktrees");
    fsx::ensure_dirs(&[&parent]).at(&parent)?;
    if path.exists() && !fsx::is_empty_dir(path).unwrap_or(false) {
        return Err(Error::conflict(format!(
            "{}: exists but is not a git worktree, so role {} cannot get one there\n  hint: move its content away (keep any .swarmforge/handoffs files), then run `swarm init` again",
            path.display(),
            r.name
        )));
    }
    let branch = crate::launch::role_branch::branch_name(&r.worktree_name);
    let p = path.to_string_lossy().into_owned();
    // A worktree folder removed by hand is still registered; forget it
    // first, its pinned branches made ordinary ones before (role_branch).
    report
        .changes
        .extend(crate::launch::role_branch::rescue_orphans(root)?);
    git(root, &["worktree", "prune"])?;
    if git_ok(
        root,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ],
    ) {
        // Keep the branch's commits: check it out instead of resetting it.
        git(root, &["worktree", "add", "-q", &p, &branch])?;
    } else {
        git(root, &["worktree", "add", "-q", "-B", &branch, &p, "HEAD"])?;
    }
    report.changes.push(format!(
        "created worktree {} on branch {branch} for role {}",
        path.display(),
        r.name
    ));
    Ok(())
}

/// A confined agent's worktree pinned, every other one an ordinary
/// checkout of its branch (launch/role_branch.rs): the sandbox keeps
/// `.git/refs` read-only, so only a pinned worktree lets it commit.
fn ensure_branch_layout(plan: &Plan, report: &mut InitReport) -> Result<()> {
    use crate::launch::role_branch;
    let root = &plan.project.root;
    let mut seen = std::collections::BTreeMap::new();
    for r in plan.roles.iter().filter(|r| r.has_own_checkout()) {
        let confined = crate::launch::confine::enabled(plan) && !r.is_human();
        let e = seen
            .entry(r.worktree_path.clone())
            .or_insert((r.worktree_name.clone(), false));
        e.1 |= confined;
    }
    for (wt, (name, confined)) in seen {
        let branch = role_branch::branch_name(&name);
        let change = if confined {
            role_branch::pin(root, &wt, &branch)?
        } else {
            role_branch::release(root, &wt, &branch)?
        };
        report.changes.extend(change);
    }
    Ok(())
}

/// Records which host this checkout is (`swarm init --host`); the name is
/// checked against `swarm.yaml`'s `hosts` when the plan is loaded.
pub fn set_host(project: &crate::protocol::layout::Project, host: &str) -> Result<()> {
    if !crate::protocol::grammar::valid_role(host) {
        return Err(Error::bad_input(format!(
            "invalid host name '{}'\n  hint: host names use letters, digits and '-'",
            crate::text::escape(host)
        )));
    }
    write_if_changed(&project.host_file(), format!("{host}\n").as_bytes())?;
    Ok(())
}

/// Makes the project ready to run; changes only what is missing or differs.
pub fn init(plan: &Plan) -> Result<InitReport> {
    let root = &plan.project.root;
    let mut report = InitReport::default();
    ensure_repo(root, &mut report)?;
    let sf = plan.project.swarmforge();
    ensure_missing(std::slice::from_ref(&sf))?;
    for r in plan.roles.iter().filter(|r| r.has_own_checkout()) {
        ensure_worktree(root, r, &mut report)?;
    }
    ensure_branch_layout(plan, &mut report)?;
    for wt in plan.worktree_paths() {
        let w = Worktree::new(&wt);
        let n = ensure_missing(&w.all_dirs())?;
        if n > 0 {
            report.changes.push(format!(
                "created {n} state folders in {}",
                w.handoffs().display()
            ));
        }
        if wt != *root {
            let mut pointer = root.to_string_lossy().into_owned();
            pointer.push('\n');
            if write_if_changed(&w.project_pointer(), pointer.as_bytes())? {
                report
                    .changes
                    .push(format!("wrote {}", w.project_pointer().display()));
            }
        }
    }
    // Roles on other hosts: a worktree-shaped proxy folder each (no git
    // worktree, no pointer: no agent works there).
    for r in &plan.remote {
        let n = ensure_missing(&r.worktree().all_dirs())?;
        if n > 0 {
            report.changes.push(format!(
                "created the bridge proxy {} for role {} on host {}",
                r.worktree_path.display(),
                r.name,
                r.worktree_name.trim_start_matches('@')
            ));
        }
    }
    let tsv = plan.project.roles_tsv();
    migrate_person_mail(plan, &mut report)?;
    if write_if_changed(&tsv, plan.roles_tsv().as_bytes())? {
        report.changes.push(format!("wrote {}", tsv.display()));
    }
    // SwarmForge's startup installs the role byline's commit-msg hook
    // (docs/swarmforge-compat.md §8); again only when it would change.
    let swarm = crate::launch::shims::own_bin_dir()?.join("swarm");
    report
        .changes
        .extend(crate::agent::byline::install(root, &swarm)?);
    Ok(report)
}

/// A person who shared an agent's inbox under the old table gets an inbox
/// of their own in the new one (protocol::people); the items waiting only
/// for them in the old, shared `inbox/new` move along (no-clobber renames
/// under that inbox's lock), so the agent's next `ready-next` cannot take
/// them. Items also meant for a role still working there stay.
fn migrate_person_mail(plan: &Plan, report: &mut InitReport) -> Result<()> {
    use crate::protocol::people;
    // The table on disk before this init rewrites it (the plan is the new one).
    let old = crate::protocol::roles::Roles::load(&plan.project.roles_tsv())?;
    let max = plan.config.limits.max_file_bytes + crate::agent::queue::STAMP_HEADROOM;
    for r in plan.roles.iter().filter(|r| r.is_person_folder()) {
        let Some(was) = old
            .find(&r.name)
            .filter(|o| o.worktree_path != r.worktree_path)
        else {
            continue;
        };
        let others: Vec<&str> = old
            .roles
            .iter()
            .filter(|o| o.name != r.name && o.worktree_path == was.worktree_path)
            .map(|o| o.name.as_str())
            .collect();
        let from = Worktree::new(&was.worktree_path);
        let to = r.worktree();
        fsx::ensure_dirs(&[to.inbox_new()]).at(to.inbox_new())?;
        let moved = crate::agent::queue::Inbox::new(&from, max).with_lock(|_| {
            let mut n = 0;
            for name in
                crate::protocol::trail::handoff_names(&from.inbox_new()).at(from.inbox_new())?
            {
                let path = from.inbox_new().join(&name);
                let crate::protocol::trail::Loaded::Ok(m) =
                    crate::protocol::trail::load_message(&path, max)
                else {
                    continue;
                };
                let only_theirs = people::meant_for(&m, &r.name)
                    && !others.iter().any(|o| people::meant_for(&m, o));
                if only_theirs {
                    fsx::move_noreplace(&path, &to.inbox_new().join(&name)).at(&path)?;
                    n += 1;
                }
            }
            Ok::<usize, Error>(n)
        })?;
        if moved > 0 {
            report.changes.push(format!(
                "moved {moved} item(s) waiting for {} from {} into its own inbox {}",
                r.name,
                from.inbox_new().display(),
                to.inbox_new().display()
            ));
        }
    }
    Ok(())
}
