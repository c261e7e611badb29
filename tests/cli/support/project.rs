//! A temp project with roles in either layout, built fluently; the daemon.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::{bin, clean_command, git, log_count, log_lines, wait_until, Run, DEADLINE};

/// The folders SwarmForge's launcher makes in every role worktree.
pub const QUEUE_DIRS: &[&str] = &[
    "outbox/tmp",
    "sent",
    "failed",
    "inbox/new",
    "inbox/in_process",
    "inbox/completed",
];

/// Every folder a message can be in.
pub const MESSAGE_DIRS: &[&str] = &[
    "outbox",
    "sent",
    "failed",
    "inbox/new",
    "inbox/in_process",
    "inbox/completed",
];

/// How role worktrees find the project.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// As `swarm init` leaves it: each role worktree has `.swarmforge/handoffs/`
    /// and a `.swarmforge/project-root` pointer (plain folders, no git
    /// worktree: the pointer is all the helpers need).
    Init,
    /// As SwarmForge's launcher leaves it: real git worktrees, every queue
    /// folder made, and `roles.tsv` copied into each role worktree.
    SwarmForge,
}

/// One row of roles.tsv. By default: the main worktree (`master`), agent
/// `codex`, mode `task`, session `swarmforge-<name>`, display name `<name>`.
#[derive(Clone, Debug)]
pub struct Role {
    pub name: String,
    pub worktree: Option<String>,
    pub path: Option<PathBuf>,
    pub agent: String,
    pub mode: String,
    pub session: Option<String>,
    pub display: Option<String>,
}

impl Role {
    pub fn new(name: &str) -> Role {
        Role {
            name: name.to_string(),
            worktree: None,
            path: None,
            agent: "codex".into(),
            mode: "task".into(),
            session: None,
            display: None,
        }
    }

    /// Worktree `wt`; unless [`Role::at`] says otherwise it lives in
    /// `.worktrees/<wt>` (`master` is the root).
    pub fn worktree(mut self, wt: &str) -> Role {
        self.worktree = Some(wt.to_string());
        self
    }

    /// The worktree's folder (relative to the root, or absolute); its name
    /// column is the role's name unless [`Role::worktree`] sets one.
    pub fn at(mut self, path: impl AsRef<Path>) -> Role {
        self.path = Some(path.as_ref().to_path_buf());
        self
    }

    pub fn agent(mut self, agent: &str) -> Role {
        self.agent = agent.to_string();
        self
    }

    pub fn mode(mut self, mode: &str) -> Role {
        self.mode = mode.to_string();
        self
    }

    pub fn session(mut self, session: &str) -> Role {
        self.session = Some(session.to_string());
        self
    }

    pub fn display(mut self, display: &str) -> Role {
        self.display = Some(display.to_string());
        self
    }

    /// The worktree column: as set, else `master` for the root, else the
    /// role's name.
    fn wt_name(&self, root: &Path) -> String {
        match (&self.worktree, &self.path) {
            (Some(wt), _) => wt.clone(),
            (None, Some(p)) if root.join(p) != root => self.name.clone(),
            _ => "master".into(),
        }
    }

    fn dir(&self, root: &Path) -> PathBuf {
        match &self.path {
            Some(p) => root.join(p),
            None => wt_dir(root, &self.wt_name(root)),
        }
    }
}

impl From<&str> for Role {
    fn from(name: &str) -> Role {
        Role::new(name)
    }
}

/// (name, worktree name, agent, receive mode), as [`Project::write_role_rows`] takes.
impl From<RoleRow<'_>> for Role {
    fn from((name, wt, agent, mode): RoleRow) -> Role {
        Role::new(name).worktree(wt).agent(agent).mode(mode)
    }
}

fn wt_dir(root: &Path, wt: &str) -> PathBuf {
    if wt == "master" {
        root.to_path_buf()
    } else {
        root.join(".worktrees").join(wt)
    }
}

/// Builds a [`Project`]: `Project::builder().role(..).config(..).build()`.
#[must_use]
pub struct ProjectBuilder {
    roles: Vec<Role>,
    layout: Layout,
    config: Option<String>,
    files: Vec<(String, String)>,
    queue_dirs: bool,
}

impl ProjectBuilder {
    pub fn role(mut self, role: impl Into<Role>) -> Self {
        self.roles.push(role.into());
        self
    }

    pub fn roles<R: Into<Role>>(mut self, roles: impl IntoIterator<Item = R>) -> Self {
        self.roles.extend(roles.into_iter().map(Into::into));
        self
    }

    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// `swarm.yaml` at the root.
    pub fn config(mut self, yaml: &str) -> Self {
        self.config = Some(yaml.to_string());
        self
    }

    /// A file (relative to the root), written before the first commit.
    pub fn file(mut self, rel: &str, content: &str) -> Self {
        self.files.push((rel.to_string(), content.to_string()));
        self
    }

    /// Makes the queue folders ([`QUEUE_DIRS`] and `inbox/tmp`) in every role
    /// worktree, as a delivery would find them.
    pub fn queue_dirs(mut self) -> Self {
        self.queue_dirs = true;
        self
    }

    pub fn build(self) -> Project {
        let p = Project::git_repo(&self.files);
        p.set_roles_in(self.layout, &self.roles);
        if self.queue_dirs {
            for dir in p.role_dirs(&self.roles) {
                for d in QUEUE_DIRS.iter().chain(&["inbox/tmp"]) {
                    fs::create_dir_all(hq(&dir, d)).unwrap();
                }
            }
        }
        if let Some(yaml) = &self.config {
            p.config(yaml);
        }
        p
    }
}

/// `<worktree>/.swarmforge/handoffs/<rel>`
pub fn hq(wt: &Path, rel: &str) -> PathBuf {
    wt.join(".swarmforge/handoffs").join(rel)
}

/// A throw-away folder outside the temp folder, where a user's HOME or
/// project is: some CLIs treat anything in `/tmp` differently (Codex will
/// not make its sandbox helper's links there, docs/agents.md "Codex and
/// bubblewrap"). Under `target/users`, or, when the checkout itself is in
/// the temp folder (a CI clone), under `~/.cache/swarm-handoff-tests`.
pub fn user_dir() -> tempfile::TempDir {
    let temp = std::env::temp_dir()
        .canonicalize()
        .unwrap_or_else(|_| std::env::temp_dir());
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/users");
    let in_temp = |p: &Path| {
        p.ancestors()
            .find_map(|a| a.canonicalize().ok())
            .is_some_and(|c| c.starts_with(&temp))
    };
    let base = match std::env::var_os("HOME").map(PathBuf::from) {
        Some(h) if in_temp(&target) && h.is_absolute() && !in_temp(&h) => {
            h.join(".cache/swarm-handoff-tests")
        }
        _ => target,
    };
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(&base).unwrap_or_else(|e| panic!("a folder under {}: {e}", base.display()))
}

/// [`user_dir`], or a throw-away folder in `base` (an ordinary user's own
/// home, which that user can reach).
pub fn user_dir_in(base: Option<&Path>) -> tempfile::TempDir {
    match base {
        Some(b) => tempfile::tempdir_in(b)
            .unwrap_or_else(|e| panic!("a folder under {}: {e}", b.display())),
        None => user_dir(),
    }
}

/// A temp project: a git repository with `.swarmforge/roles.tsv`.
pub struct Project {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
}

/// A role row for [`Project::write_role_rows`]: (name, worktree name, agent,
/// receive mode). A worktree other than `master` lives in `.worktrees/<name>`.
pub type RoleRow<'a> = (&'a str, &'a str, &'a str, &'a str);

impl Project {
    pub fn builder() -> ProjectBuilder {
        ProjectBuilder {
            roles: Vec::new(),
            layout: Layout::Init,
            config: None,
            files: Vec::new(),
            queue_dirs: false,
        }
    }

    /// A project with roles from rows in the `swarm init` layout.
    pub fn with_roles(rows: &[RoleRow]) -> Project {
        Project::builder().roles(rows.iter().copied()).build()
    }

    /// `coder` in the main worktree, `reviewer` in `.worktrees/rev`; no wake-ups.
    pub fn coder_and_reviewer() -> Project {
        Project::builder()
            .role("coder")
            .role(Role::new("reviewer").worktree("rev"))
            .config("wake: {method: none}\n")
            .build()
    }

    /// An empty temp folder: no git, no roles (`swarm init` makes them).
    pub fn empty() -> Project {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().unwrap();
        Project { dir, root }
    }

    /// An empty folder where a user keeps a project: outside the temp
    /// folder (see [`user_dir`]).
    pub fn empty_at_home() -> Project {
        Project::empty_in(None)
    }

    /// An empty folder in `base` (see [`user_dir_in`]).
    pub fn empty_in(base: Option<&Path>) -> Project {
        let dir = user_dir_in(base);
        let root = dir.path().canonicalize().unwrap();
        Project { dir, root }
    }

    /// A git repository whose one commit holds `README` and `files`.
    fn git_repo(files: &[(String, String)]) -> Project {
        let p = Project::empty();
        git(&p.root, &["init", "-q", "-b", "master"]);
        p.write("README", "x\n");
        for (rel, content) in files {
            p.write(rel, content);
        }
        git(&p.root, &["add", "."]);
        git(&p.root, &["commit", "-q", "-m", "init"]);
        p
    }

    /// A git repository with one commit and the given roles, all in the main
    /// worktree: `(name, mode)`.
    pub fn new(roles: &[(&str, &str)]) -> Project {
        let p = Project::git_repo(&[]);
        p.write_roles(roles);
        p
    }

    /// Rewrites roles.tsv with every role in the main worktree.
    pub fn write_roles(&self, roles: &[(&str, &str)]) {
        let roles: Vec<Role> = roles
            .iter()
            .map(|(name, mode)| Role::new(name).mode(mode))
            .collect();
        self.set_roles(&roles);
    }

    pub fn write_roles_raw(&self, text: &str) {
        self.write(".swarmforge/roles.tsv", text);
    }

    /// Rewrites roles.tsv from rows; each role worktree gets its state folder
    /// and a `project-root` pointer, as `swarm init` makes them.
    pub fn write_role_rows(&self, rows: &[RoleRow]) {
        let roles: Vec<Role> = rows.iter().map(|r| Role::from(*r)).collect();
        self.set_roles(&roles);
    }

    /// Rewrites roles.tsv in the `swarm init` layout.
    pub fn set_roles(&self, roles: &[Role]) {
        self.set_roles_in(Layout::Init, roles);
    }

    /// Rewrites roles.tsv and lays out the role worktrees.
    pub fn set_roles_in(&self, layout: Layout, roles: &[Role]) {
        let mut tsv = String::new();
        for r in roles {
            let session = r
                .session
                .clone()
                .unwrap_or_else(|| format!("swarmforge-{}", r.name));
            tsv.push_str(&format!(
                "{}\t{}\t{}\t{session}\t{}\t{}\t{}\n",
                r.name,
                r.wt_name(&self.root),
                r.dir(&self.root).display(),
                r.display.as_deref().unwrap_or(&r.name),
                r.agent,
                r.mode
            ));
        }
        self.write_roles_raw(&tsv);
        let others: Vec<PathBuf> = self
            .role_dirs(roles)
            .into_iter()
            .filter(|d| *d != self.root)
            .collect();
        match layout {
            Layout::Init => {
                for dir in &others {
                    fs::create_dir_all(hq(dir, "")).unwrap();
                    fs::write(
                        dir.join(".swarmforge/project-root"),
                        format!("{}\n", self.root.display()),
                    )
                    .unwrap();
                }
            }
            Layout::SwarmForge => {
                for r in roles {
                    let dir = r.dir(&self.root);
                    if dir != self.root && !dir.join(".git").exists() {
                        let branch = format!("swarmforge-{}", r.wt_name(&self.root));
                        let at = dir.to_str().unwrap();
                        git(
                            &self.root,
                            &[
                                "worktree", "add", "-q", "--force", "-B", &branch, at, "HEAD",
                            ],
                        );
                    }
                }
                for dir in &others {
                    fs::create_dir_all(dir.join(".swarmforge")).unwrap();
                    fs::write(dir.join(".swarmforge/roles.tsv"), &tsv).unwrap();
                }
                for dir in std::iter::once(self.root.clone()).chain(others) {
                    for d in QUEUE_DIRS {
                        fs::create_dir_all(hq(&dir, d)).unwrap();
                    }
                }
            }
        }
    }

    /// Each role's worktree folder, once each, in order.
    fn role_dirs(&self, roles: &[Role]) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for r in roles {
            let d = r.dir(&self.root);
            if !out.contains(&d) {
                out.push(d);
            }
        }
        out
    }

    /// The worktree of `role` as roles.tsv says; the root when it is not there.
    pub fn role_dir(&self, role: &str) -> PathBuf {
        fs::read_to_string(self.path(".swarmforge/roles.tsv"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split('\t').collect::<Vec<_>>())
            .find(|cols| cols.len() >= 3 && cols[0] == role)
            .map(|cols| PathBuf::from(cols[2]))
            .unwrap_or_else(|| self.root.clone())
    }

    /// `swarm.yaml` with `daemon` settings (e.g. `ack_within: 1s`, or
    /// empty) and a wake-up that appends the woken role to a file; returns
    /// that file (`<root>/wakes.txt`), one role a line.
    pub fn record_wakes(&self, daemon: &str) -> PathBuf {
        let wakes = self.path("wakes.txt");
        let daemon = match daemon {
            "" => String::new(),
            d => format!("daemon: {{{d}}}\n"),
        };
        self.config(&format!(
            "{daemon}wake: {{method: command, command: \"echo $SWARMFORGE_ROLE >> {}\"}}\n",
            wakes.display()
        ));
        wakes
    }

    /// `swarm.yaml` at the root.
    pub fn config(&self, yaml: &str) -> PathBuf {
        self.write("swarm.yaml", yaml)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// `<root>/.swarmforge/handoffs/<rel>`
    pub fn handoffs(&self, rel: &str) -> PathBuf {
        self.root.join(".swarmforge/handoffs").join(rel)
    }

    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, content).unwrap();
        p
    }

    /// A file's text; empty when it is missing.
    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap_or_default()
    }

    /// Copies `examples/swarm/<name>` into the project.
    pub fn copy_example(&self, name: &str) {
        super::copy_tree(&super::example_dir(name), &self.root);
    }

    /// A new commit; returns its full hash.
    pub fn commit(&self, msg: &str) -> String {
        fs::write(self.root.join("change.txt"), msg).unwrap();
        git(&self.root, &["add", "change.txt"]);
        git(&self.root, &["commit", "-q", "-m", msg]);
        git(&self.root, &["rev-parse", "HEAD"])
    }

    /// Runs a binary in `cwd` (relative to the root) as `role` (None: unset).
    pub fn run_in(&self, cwd: &str, role: Option<&str>, program: &str, args: &[&str]) -> Run {
        let mut c = self.cmd(program).at(cwd).args(args);
        if let Some(r) = role {
            c = c.role(r);
        }
        c.run()
    }

    pub fn run(&self, role: Option<&str>, program: &str, args: &[&str]) -> Run {
        self.run_in("", role, program, args)
    }

    /// `swarm <args>` at the root, as a person (no role).
    pub fn swarm(&self, args: &[&str]) -> Run {
        self.cmd("swarm").args(args).run()
    }

    /// Writes `draft.txt` and sends it as `role`.
    pub fn send(&self, role: &str, draft: &str) -> Run {
        self.write("draft.txt", draft);
        self.run(Some(role), "swarm-handoff", &["draft.txt"])
    }

    /// Files (not dirs) directly in a folder, sorted by name.
    pub fn files(&self, dir: &Path) -> Vec<String> {
        super::files(dir)
    }

    /// Delivers every outbox file once with `handoffd --once`.
    pub fn deliver_once(&self) -> Run {
        self.cmd("handoffd").arg("--once").arg(&self.root).run()
    }

    /// Starts `handoffd [extra] <root>` (stderr into `<root>/handoffd.stderr`)
    /// and waits until this very process holds the pid file and has logged
    /// one more `started` line, so it also waits correctly for a restart.
    /// Killed when the guard drops.
    pub fn spawn_daemon(&self, extra: &[&str]) -> Daemon {
        self.spawn_daemon_env(extra, &[])
    }

    /// [`Project::spawn_daemon`] with more environment (e.g. a shortened
    /// `HANDOFFD_ORDER_RELIST`).
    pub fn spawn_daemon_env(&self, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        let before = log_count(&self.log(), "started");
        let err_path = self.root.join("handoffd.stderr");
        let err = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&err_path)
            .unwrap();
        let child = clean_command(&bin("handoffd"), &self.root)
            .envs(env.iter().copied())
            .args(extra)
            .arg(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("handoffd starts");
        let pid = child.id();
        let mut d = Daemon { child: Some(child) };
        let pid_file = self.root.join(".swarmforge/daemon/handoffd.pid");
        let end = Instant::now() + DEADLINE;
        loop {
            let mine = fs::read_to_string(&pid_file).is_ok_and(|s| s.trim() == pid.to_string());
            if mine && log_count(&self.log(), "started") > before {
                return d;
            }
            if let Some(Some(code)) = d.child.as_mut().map(|c| c.try_wait().ok().flatten()) {
                panic!(
                    "handoffd exited with {code:?} while starting; stderr:\n{}",
                    fs::read_to_string(&err_path).unwrap_or_default()
                );
            }
            assert!(Instant::now() < end, "handoffd did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `handoffd.log`, its rotated parts first (`handoffd.log.<offset>`).
    pub fn log(&self) -> String {
        rotated_log(&self.root.join(".swarmforge/daemon/handoffd.log"))
    }

    /// Rewrites `events.jsonl` line by line (`None` drops the line): what
    /// an older daemon, or a line lost with a kill, would have left.
    pub fn edit_events(&self, f: impl Fn(&str) -> Option<String>) {
        let path = self.path(".swarmforge/daemon/events.jsonl");
        let text: String = fs::read_to_string(&path)
            .unwrap()
            .lines()
            .filter_map(f)
            .map(|l| l + "\n")
            .collect();
        fs::write(&path, text).unwrap();
    }

    /// `events.jsonl`, one JSON value a line; every complete line must parse
    /// (a last line without its newline may still be being written).
    pub fn events(&self) -> Vec<serde_json::Value> {
        let text = rotated_log(&self.path(".swarmforge/daemon/events.jsonl"));
        let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        complete
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
            .collect()
    }

    /// The folder of worktree `wt` (`master` is the root).
    pub fn wt_path(&self, wt: &str) -> PathBuf {
        wt_dir(&self.root, wt)
    }

    /// `<worktree>/.swarmforge/handoffs/<rel>`
    pub fn hq(&self, wt: &str, rel: &str) -> PathBuf {
        hq(&self.wt_path(wt), rel)
    }
}

/// A rotated log read whole: its parts `<name>.<12-digit offset>` (oldest
/// first, as their zero-padded names sort), then the live file.
pub fn rotated_log(live: &Path) -> String {
    let name = live.file_name().unwrap().to_string_lossy().into_owned();
    let mut parts: Vec<PathBuf> = fs::read_dir(live.parent().unwrap())
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy().into_owned();
                    n.strip_prefix(&format!("{name}."))
                        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                })
                .collect()
        })
        .unwrap_or_default();
    parts.sort();
    parts.push(live.to_path_buf());
    parts
        .iter()
        .map(|p| fs::read_to_string(p).unwrap_or_default())
        .collect()
}

/// Waits for `delivered <outbox path>`, the last step of a delivery (after
/// every copy is published and the original is in `sent/`).
pub fn wait_delivered(p: &Project, outbox_path: &Path) {
    let want = format!("delivered {}", outbox_path.display());
    wait_until(DEADLINE, &want, || {
        log_lines(&p.log(), "delivered").contains(&want)
    });
}

/// A running daemon, killed on drop.
pub struct Daemon {
    pub child: Option<Child>,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Asserts the daemon is still running.
    pub fn alive(&mut self) {
        let st = self.child.as_mut().unwrap().try_wait().unwrap();
        assert!(st.is_none(), "handoffd exited: {st:?}");
    }

    /// Waits for the process to exit; returns its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let end = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                self.child = None;
                return st.code();
            }
            if Instant::now() > end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
