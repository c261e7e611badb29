//! The agent layer with the real agent CLIs (issue 20): `swarm up` starts
//! each role's real CLI with its preset in tmux, pointed through the CLI's
//! own settings in the role's worktree at a scripted model on 127.0.0.1
//! (support/model_server.rs). HOME is a temp folder that never ran any of
//! the CLIs, nothing pre-answered in it: Claude Code's first start is
//! answered in its pane as a person answers it (support/first_run.rs), and
//! the CLIs' folder-trust dialogs are met as a new user meets them, and
//! either seen by the swarm (`needs_input`, nothing typed into them) or
//! answered beforehand by `swarm up --trust`. No traffic leaves the machine.
//!
//! The CLIs are the pinned versions `.ci/run` installs with npm into
//! `target/agent-clis` (or the folder `SWARM_AGENT_CLIS` names); without
//! them a test is skipped with a NOTE, and fails with `CI=true`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    handoff_names, hq, require_capability, require_tool, user_dir, user_dir_in, ModelServer,
    Project, Step, SwarmGuard,
};

/// The dummy token Claude Code sends the scripted model.
pub(crate) const CLAUDE_TOKEN: &str = "dummy-token-for-the-scripted-model";

/// A whole scripted conversation, real CLI start-up included.
pub(crate) const LONG: Duration = Duration::from_secs(120);

/// `<clis>/node_modules/.bin`, holding `cli`, or None after a NOTE.
#[track_caller]
pub(crate) fn agent_bin(cli: &str) -> Option<PathBuf> {
    let bin = crate::support::agent_clis_dir().join("node_modules/.bin");
    let home = tempfile::tempdir().unwrap();
    let probe = std::process::Command::new(bin.join(cli))
        .arg("--version")
        .env("HOME", home.path())
        .output()
        .map_err(|e| format!("{}: {e}", bin.join(cli).display()))
        .and_then(|o| {
            if o.status.success() {
                Ok(bin.clone())
            } else {
                Err(String::from_utf8_lossy(&o.stderr).into_owned())
            }
        });
    require_capability(
        &format!("run the real {cli} CLI from {}", bin.display()),
        "run .ci/run, which installs the pinned CLIs with npm into target/agent-clis",
        probe,
    )
}

/// A swarm of real CLIs talking to one scripted model. Fields drop in
/// order: the guard's `swarm down` must run while the project still exists
/// (Codex and Gemini CLI outlive the SIGHUP of a killed tmux server).
pub(crate) struct RealSwarm {
    pub(crate) guard: SwarmGuard,
    pub(crate) d: Project,
    pub(crate) model: ModelServer,
    pub(crate) home: tempfile::TempDir,
    pub(crate) bin: PathBuf,
    /// Folders put first on the swarm's PATH (a system bwrap).
    pub(crate) path_first: Vec<PathBuf>,
    /// The ordinary user (uid, gid) `swarm` runs as, when the test runs as
    /// root (see [`RealSwarm::as_ordinary_user`]).
    pub(crate) user: Option<(u32, u32)>,
    /// Where the project, HOME and helper folders are made (None: see
    /// `user_dir`).
    base: Option<PathBuf>,
    /// More of the person's environment for every `swarm` command.
    pub(crate) env: Vec<(String, PathBuf)>,
    /// The `swarm` the person runs (None: the one cargo built); an
    /// ordinary user runs their own copy (see [`RealSwarm::as_ordinary_user`]).
    pub(crate) swarm_exe: Option<PathBuf>,
    /// The dummy gateway token in the person's environment
    /// (`ANTHROPIC_AUTH_TOKEN`), set by [`RealSwarm::claude`]: Claude Code's
    /// first start in a never-used HOME takes its login from there. The
    /// worktree's settings apply only after the folder trust; with the
    /// token only there, the first start checks its connection to
    /// api.anthropic.com, which no test reaches, and exits.
    pub(crate) token_in_env: std::cell::Cell<bool>,
}

impl RealSwarm {
    /// `swarm init` for `yaml`; the model server is started, no agent yet.
    pub(crate) fn init(yaml: &str, bin: PathBuf) -> RealSwarm {
        RealSwarm::init_in(yaml, bin, None)
    }

    /// [`RealSwarm::init`] with the project, HOME and helper folders in
    /// `base` (an ordinary user's home).
    pub(crate) fn init_in(yaml: &str, bin: PathBuf, base: Option<PathBuf>) -> RealSwarm {
        let model = ModelServer::start();
        // Where a user keeps a project and a HOME: outside the temp folder
        // (Codex treats a CODEX_HOME there differently, docs/agents.md).
        let d = Project::empty_in(base.as_deref());
        d.write(
            "swarm.yaml",
            &yaml.replace("@MODEL@", &format!("http://127.0.0.1:{}", model.port)),
        );
        d.swarm(&["init"]).ok();
        // A HOME that never ran any of the CLIs: nothing pre-answered.
        let home = user_dir_in(base.as_deref());
        RealSwarm {
            guard: SwarmGuard::new(&d.root),
            d,
            model,
            home,
            bin,
            path_first: Vec::new(),
            user: None,
            base,
            env: Vec::new(),
            swarm_exe: None,
            token_in_env: std::cell::Cell::new(false),
        }
    }

    /// Debian's bubblewrap `real`, through a logging script, first on the
    /// swarm's PATH (its log in HOME: for a confined agent, its private home).
    pub(crate) fn bwrap_on_path(&mut self, real: &Path) -> BwrapOnPath {
        let mut b = BwrapOnPath::new(
            real,
            self.home.path().join("bwrap-calls"),
            self.base.as_deref(),
        );
        b.agents = Some(self.d.root.join(".swarmforge/agents"));
        self.path_first.push(b.dir.path().to_path_buf());
        b
    }

    /// From here on `swarm` runs as `acct`, which is given the project, the
    /// HOME and `extra` folders (as an ordinary user's own are), and runs
    /// its own installed copy of the binaries (the checkout may sit in a
    /// folder it cannot enter, support/userland.rs).
    pub(crate) fn as_ordinary_user(&mut self, acct: &crate::support::Account, extra: &[&Path]) {
        for dir in [self.d.root.as_path(), self.home.path()]
            .into_iter()
            .chain(extra.iter().copied())
        {
            acct.give(dir);
        }
        self.user = acct.ids;
        self.swarm_exe = Some(acct.installed().join("swarm"));
    }

    pub(crate) fn wt(&self, role: &str) -> PathBuf {
        self.d.role_dir(role)
    }

    /// Claude Code for `role`: its endpoint and a dummy token in the
    /// worktree's `.claude/settings.json` (`env`, applied to that session
    /// only), the token also in the person's environment (see
    /// [`RealSwarm::token_in_env`]).
    pub(crate) fn claude(&self, role: &str, steps: Vec<Step>) {
        self.model.script(role, steps);
        self.token_in_env.set(true);
        let wt = self.wt(role);
        let settings = json!({"env": {
            "ANTHROPIC_BASE_URL": self.model.url(role),
            "ANTHROPIC_AUTH_TOKEN": CLAUDE_TOKEN,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }});
        self.d.write(
            &format!(
                "{}/.claude/settings.json",
                wt.strip_prefix(&self.d.root).unwrap().display()
            ),
            &settings.to_string(),
        );
    }

    /// Codex for `role` (project-local config may not name a model
    /// provider; the role's `args:` do, see [`codex_args`]).
    pub(crate) fn codex(&self, role: &str, steps: Vec<Step>) {
        self.model.script(role, steps);
    }

    /// Gemini CLI for `role`: its endpoint and a dummy key in the worktree's
    /// `.gemini/.env`, API-key auth in its `.gemini/settings.json` (which
    /// `swarm up` merges its hook into; an untrusted folder's settings and
    /// `.env` are not read).
    pub(crate) fn gemini(&self, role: &str, steps: Vec<Step>) {
        self.model.script(role, steps);
        let wt = self.wt(role);
        let rel = wt.strip_prefix(&self.d.root).unwrap().display().to_string();
        self.d.write(
            &format!("{rel}/.gemini/.env"),
            &format!(
                "GEMINI_API_KEY=dummy-key-for-the-scripted-model\nGOOGLE_GEMINI_BASE_URL={}\n",
                self.model.url(role)
            ),
        );
        self.d.write(
            &format!("{rel}/.gemini/settings.json"),
            &json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": false},
                "general": {"disableAutoUpdate": true, "disableUpdateNag": true}})
            .to_string(),
        );
    }

    /// `swarm <args>` with the CLIs first on PATH and HOME the temp folder.
    pub(crate) fn swarm(&self, args: &[&str]) -> crate::support::Run {
        let mut dirs = self.path_first.clone();
        dirs.push(self.bin.clone());
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let path = std::env::join_paths(dirs).unwrap();
        let as_user = self
            .user
            .map(|(u, g)| {
                vec![
                    "setpriv".to_string(),
                    format!("--reuid={u}"),
                    format!("--regid={g}"),
                    "--clear-groups".to_string(),
                ]
            })
            .unwrap_or_default();
        let exe = self
            .swarm_exe
            .as_ref()
            .map_or("swarm".to_string(), |e| e.display().to_string());
        let mut c = self
            .d
            .cmd(&exe)
            .under(&as_user.iter().map(String::as_str).collect::<Vec<_>>())
            .args(args)
            .env("PATH", path)
            .env("HOME", self.home.path());
        if self.token_in_env.get() {
            c = c.env("ANTHROPIC_AUTH_TOKEN", CLAUDE_TOKEN);
        }
        for (k, v) in &self.env {
            c = c.env(k, v);
        }
        c.run()
    }

    /// `swarm up --detach --trust` in tmux: the person agreed to trust the
    /// worktrees, so no dialog waits.
    fn up(&mut self) {
        self.up_with(&["--trust"]);
    }

    /// `swarm up --detach <extra>` in tmux, Claude Code's first start then
    /// answered in its panes ([`RealSwarm::answer_first_start`]).
    pub(crate) fn up_with(&mut self, extra: &[&str]) {
        self.start(extra);
        self.answer_first_start();
    }

    /// `swarm up --detach <extra>` in tmux, nothing answered.
    pub(crate) fn start(&mut self, extra: &[&str]) {
        let mut args = vec!["up", "--detach"];
        args.extend_from_slice(extra);
        let r = self.swarm(&args);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        self.guard.socket = Some(PathBuf::from(self.d.read(".swarmforge/tmux-socket").trim()));
    }

    /// The interactive Claude Code roles (in tmux, not `runtime: headless`).
    pub(crate) fn claude_panes(&self) -> Vec<String> {
        use swarm_handoff::protocol::config::{Config, Runtime};
        let cfg = Config::load(&self.d.root.join("swarm.yaml")).unwrap();
        cfg.roles
            .iter()
            .filter(|r| r.agent == "claude" && r.runtime == Runtime::Tmux)
            .map(|r| r.name.clone())
            .collect()
    }

    /// Answers each interactive Claude Code role's first-start pages in its
    /// pane, as the person does (support/first_run.rs): HOME never ran
    /// Claude Code. Nothing to answer once the role's CLI recorded them (a
    /// confined role in its private home's copy, carried across restarts;
    /// an unconfined one in HOME).
    pub(crate) fn answer_first_start(&self) {
        let roles = self.claude_panes();
        if roles.is_empty() {
            return;
        }
        let agents = self.d.root.join(".swarmforge/agents");
        let home = self.home.path().join(".claude.json");
        crate::support::answer_first_start(
            &|args| self.swarm(args),
            &roles,
            &|role| {
                crate::support::onboarded(&agents.join(role).join("home/.claude.json"))
                    || crate::support::onboarded(&home)
            },
            LONG,
        );
    }

    /// Waits for `what`; on a timeout the model's log and the panes are shown.
    pub(crate) fn wait(&self, what: &str, mut cond: impl FnMut() -> bool) {
        let end = std::time::Instant::now() + LONG;
        let mut pause = Duration::from_millis(20);
        while std::time::Instant::now() < end {
            if cond() {
                return;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(250));
        }
        if cond() {
            return;
        }
        panic!(
            "timed out after {LONG:?} waiting for: {what}\n--- model requests:\n{}\n--- panes:\n{}\n--- handoffd.log:\n{}\n--- headless agents' logs:\n{}",
            self.model.dump(),
            self.panes(),
            self.d.log(),
            self.agent_logs()
        );
    }

    /// The headless agents' logs (`.swarmforge/agents/*.log`), their ends.
    fn agent_logs(&self) -> String {
        let mut out = String::new();
        let dir = self.d.root.join(".swarmforge/agents");
        for e in fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.path().extension().is_some_and(|x| x == "log") {
                let t = fs::read_to_string(e.path()).unwrap_or_default();
                let tail: String = t
                    .chars()
                    .rev()
                    .take(4000)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                out.push_str(&format!("== {}\n{tail}\n", e.path().display()));
            }
        }
        out
    }

    fn panes(&self) -> String {
        let Some(sock) = &self.guard.socket else {
            return String::new();
        };
        let tmux = |args: &[&str]| {
            std::process::Command::new("tmux")
                .arg("-S")
                .arg(sock)
                .args(args)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        tmux(&["list-sessions", "-F", "#{session_name}"])
            .lines()
            .map(|s| format!("== {s}\n{}", tmux(&["capture-pane", "-p", "-t", s])))
            .collect()
    }

    /// `role`'s conversation has reached step `n`.
    pub(crate) fn reached(&self, role: &str, n: usize) -> bool {
        self.model.reached(role, n)
    }

    /// The request in which `role` asked for step `n`.
    pub(crate) fn turn(&self, role: &str, n: usize) -> Value {
        self.model
            .turns(role)
            .into_iter()
            .find(|r| r["step"] == n)
            .unwrap_or_else(|| panic!("{role} never asked for step {n}:\n{}", self.model.dump()))
    }

    /// The owner's `text` to `role`, delivered into its inbox, then the
    /// model's gate `gate` opened: the step that waited for mail answers.
    fn mail_then_open(&self, role: &str, text: &str, gate: &str) {
        self.d.send("owner", &draft(role, text)).ok();
        self.wait("the mail is delivered", || self.waiting(role) == 1);
        self.model.open(gate);
    }

    pub(crate) fn completed(&self, role: &str) -> usize {
        handoff_names(&hq(&self.wt(role), "inbox/completed")).len()
    }

    /// The items `role` finished, the answers its ACP client read for it
    /// (completed on the agent's behalf) left out.
    pub(crate) fn completed_work(&self, role: &str) -> usize {
        let dir = hq(&self.wt(role), "inbox/completed");
        handoff_names(&dir)
            .iter()
            .filter(|n| {
                !fs::read_to_string(dir.join(n))
                    .unwrap_or_default()
                    .contains("\ntype: answer\n")
            })
            .count()
    }

    pub(crate) fn waiting(&self, role: &str) -> usize {
        handoff_names(&hq(&self.wt(role), "inbox/new")).len()
    }

    /// Waits for the first copy in the owner's (a person's own folder,
    /// `.swarmforge/people/owner`) `inbox/new`,
    /// which must contain `text`.
    fn owner_got(&self, text: &str) {
        let owner_new = hq(&self.d.root.join(".swarmforge/people/owner"), "inbox/new");
        self.wait("a reply is delivered to owner", || {
            !handoff_names(&owner_new).is_empty()
        });
        let reply = fs::read_to_string(owner_new.join(&handoff_names(&owner_new)[0])).unwrap();
        assert!(reply.contains(text), "{reply}");
    }

    /// The role's entry in `swarm status --json`.
    pub(crate) fn status_of(&self, role: &str) -> Value {
        let st = self.d.swarm(&["status", "--json"]).json();
        st["roles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["role"] == role)
            .cloned()
            .unwrap()
    }

    /// `swarm audit --check` is clean; returns the transcript.
    fn audit_and_transcript(&self) -> String {
        self.d.swarm(&["audit", "--check"]).ok();
        let t = self.d.swarm(&["transcript"]);
        t.ok();
        t.stdout.clone()
    }
}

/// Every string in a JSON value, one a line, in order.
pub(crate) fn strings(v: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(v, &mut out);
    out
}

/// Claude's system prompt as one text.
fn system_text(req: &Value) -> String {
    match &req["body"]["system"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of the last user message of a Messages API request (tool
/// results included).
pub(crate) fn last_user_text(req: &Value) -> String {
    let Some(m) = req["body"]["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    strings(&m["content"])
}

/// The tool names a request offers.
fn tool_names(req: &Value) -> Vec<String> {
    req["body"]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn draft(to: &str, message: &str) -> String {
    format!("type: note\nto: {to}\npriority: 20\nmessage: {message}\n")
}

/// Claude Code's Write tool putting `text` into `dir/name`.
pub(crate) fn claude_write(dir: &Path, name: &str, text: &str) -> Step {
    Step::tool(
        "Write",
        json!({"file_path": dir.join(name).display().to_string(), "content": text}),
    )
}

const PAIR_YAML: &str = r#"launch:
  stagger: 0ms
roles:
  - name: lead
    agent: claude
    worktree: lead
    description: splits requests into tasks for the coder
    wake: queue
  - name: coder
    agent: claude
    worktree: coder
    description: implements each task
    wake: queue
  - name: owner
    agent: human
"#;

/// Two Claude Code agents hand a task and its answer round trip, through
/// the wrappers run by Claude's own Bash tool; the request carries the
/// primer, the tool results carry the items.
#[test]
fn claude_code_pair_hands_a_task_and_its_answer_round_trip() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(bin) = agent_bin("claude") else {
        return;
    };
    let mut s = RealSwarm::init(PAIR_YAML, bin);
    let lead = s.wt("lead");
    let coder = s.wt("coder");
    s.claude(
        "lead",
        vec![
            Step::shell("ready_for_next.sh --wait 60"),
            claude_write(&lead, "ask.txt", &draft("coder", "add a --version flag")),
            Step::shell("swarm_handoff.sh ask.txt"),
            Step::shell("done_with_current.sh"),
            Step::shell("ready_for_next.sh --wait 60"),
            Step::shell("done_with_current.sh"),
            Step::text("The coder added the flag; all done."),
        ],
    );
    s.claude(
        "coder",
        vec![
            Step::shell("ready_for_next.sh --wait 60"),
            // Held until lead has finished its item, so its
            // done_with_current.sh cannot take the answer early.
            claude_write(&coder, "answer.txt", &draft("lead", "added --version"))
                .after("lead-done"),
            Step::shell("swarm_handoff.sh answer.txt"),
            Step::shell("done_with_current.sh"),
            Step::text("Done with the task."),
        ],
    );
    s.up();
    s.d.send("owner", &draft("lead", "please get a --version flag built"))
        .ok();
    s.wait("lead finished its first item", || s.reached("lead", 4));
    s.model.open("lead-done");
    s.wait("both conversations at their end", || {
        s.reached("lead", 6) && s.reached("coder", 4) && s.completed("lead") == 2
    });

    // The primer, as the model receives it.
    let primer = s.d.swarm(&["prompt", "lead"]).stdout.clone();
    let first = s.turn("lead", 0);
    assert!(
        system_text(&first).contains(primer.trim()),
        "lead's system prompt lacks its primer:\n{}",
        system_text(&first)
    );
    assert!(tool_names(&first).iter().any(|t| t == "Bash"));
    // What the wrappers printed came back as tool results.
    let took = last_user_text(&s.turn("lead", 1));
    assert!(
        took.contains("TASK:") && took.contains("please get a --version flag built"),
        "{took}"
    );
    let sent = last_user_text(&s.turn("lead", 3));
    assert!(sent.contains("HANDOFF QUEUED:"), "{sent}");
    let coder_took = last_user_text(&s.turn("coder", 1));
    assert!(coder_took.contains("add a --version flag"), "{coder_took}");
    let answer = last_user_text(&s.turn("lead", 5));
    assert!(
        answer.contains("FROM: coder") && answer.contains("added --version"),
        "{answer}"
    );
    assert!(last_user_text(&s.turn("coder", 4)).contains("COMPLETED:"));
    assert_eq!(s.completed("coder"), 1);

    let t = s.audit_and_transcript();
    for m in [
        "please get a --version flag built",
        "add a --version flag",
        "added --version",
    ] {
        assert!(t.contains(m), "transcript lacks {m:?}:\n{t}");
    }
}

/// A Codex role's `args:` pointing it at the scripted model: a model
/// provider on the Responses API over plain HTTP (no WebSocket), given with
/// `-c` overrides.
pub(crate) fn codex_args(role: &str) -> String {
    format!(
        r#"["-c", "model=scripted", "-c", "model_provider=scripted", "-c", "model_providers.scripted={{name=\"scripted\", base_url=\"@MODEL@/{role}/v1\", wire_api=\"responses\", supports_websockets=false}}"]"#
    )
}

/// The texts of a Responses API request's input items, joined.
pub(crate) fn input_text(req: &Value) -> String {
    strings(&req["body"]["input"])
}

/// The output of the last tool call in a Responses API request.
fn last_output(req: &Value) -> String {
    req["body"]["input"]
        .as_array()
        .and_then(|a| a.iter().rev().find(|i| i["type"] == "function_call_output"))
        .map(|i| i["output"].to_string())
        .unwrap_or_default()
}

/// Claude Code hands a task to Codex and takes its answer: Codex reads its
/// primer from the worktree's AGENTS.md and runs the wrappers through its
/// own shell tool (`exec_command`) with its sandbox off (`permission: full`;
/// every other Codex test runs with it on).
#[test]
fn claude_code_and_codex_hand_a_task_and_its_answer_round_trip() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let (Some(bin), Some(_)) = (agent_bin("claude"), agent_bin("codex")) else {
        return;
    };
    let yaml = format!(
        r#"launch:
  stagger: 0ms
roles:
  - name: lead
    agent: claude
    worktree: lead
    description: splits requests into tasks for the coder
    wake: queue
  - name: coder
    agent: codex
    worktree: coder
    description: implements each task
    wake: queue
    permission: full
    args: {}
  - name: owner
    agent: human
"#,
        codex_args("coder")
    );
    let mut s = RealSwarm::init(&yaml, bin);
    let lead = s.wt("lead");
    s.claude(
        "lead",
        vec![
            Step::shell("ready_for_next.sh --wait 60"),
            claude_write(&lead, "ask.txt", &draft("coder", "add a --version flag")),
            Step::shell("swarm_handoff.sh ask.txt"),
            Step::shell("done_with_current.sh"),
            Step::shell("ready_for_next.sh --wait 60"),
            Step::shell("done_with_current.sh"),
            Step::text("Codex added the flag; all done."),
        ],
    );
    s.codex(
        "coder",
        vec![
            // Held until the task waits for coder (and lead has finished
            // its item), so one short command takes it.
            Step::shell("ready_for_next.sh").after("task-sent"),
            Step::shell(&format!(
                "printf '{}' > answer.txt && swarm_handoff.sh answer.txt",
                draft("lead", "added --version").replace('\n', "\\n")
            )),
            Step::shell("done_with_current.sh"),
            Step::text("Done with the task."),
        ],
    );
    s.up();
    s.d.send("owner", &draft("lead", "please get a --version flag built"))
        .ok();
    s.wait("lead sent the task and finished its item", || {
        s.reached("lead", 4) && s.waiting("coder") == 1
    });
    s.model.open("task-sent");
    s.wait("both conversations at their end", || {
        s.reached("lead", 6) && s.reached("coder", 3) && s.completed("lead") == 2
    });

    // Codex got its primer from AGENTS.md.
    let primer = s.d.swarm(&["prompt", "coder"]).stdout.clone();
    let first = s.turn("coder", 0);
    assert!(
        input_text(&first).contains(primer.trim()),
        "coder's request lacks its primer:\n{}",
        input_text(&first)
    );
    let took = last_output(&s.turn("coder", 1));
    assert!(
        took.contains("TASK:") && took.contains("add a --version flag"),
        "{took}"
    );
    let told = strings(&s.turn("coder", 0)["body"]);
    assert!(
        told.contains("danger-full-access"),
        "Codex did not run with its sandbox off:\n{told}"
    );
    assert!(last_output(&s.turn("coder", 2)).contains("HANDOFF QUEUED:"));
    assert!(last_output(&s.turn("coder", 3)).contains("COMPLETED:"));
    let answer = last_user_text(&s.turn("lead", 5));
    assert!(
        answer.contains("FROM: coder") && answer.contains("added --version"),
        "{answer}"
    );
    assert_eq!(s.completed("coder"), 1);
    let t = s.audit_and_transcript();
    for m in ["add a --version flag", "added --version"] {
        assert!(t.contains(m), "transcript lacks {m:?}:\n{t}");
    }
}

const MCP_YAML: &str = r#"launch:
  stagger: 0ms
roles:
  - name: coder
    agent: claude
    worktree: coder
    description: answers questions
    wake: queue
    mcp: true
  - name: owner
    agent: human
"#;

/// A Claude Code role with `mcp: true` takes and answers work through
/// `swarm mcp`'s tools (listed as `mcp__swarm__<tool>`), and its `Stop` hook
/// (`swarm hook claude Stop`) keeps it going when mail arrived while it
/// worked: the continuation carries the hook's reason.
#[test]
fn claude_code_takes_work_through_swarm_mcp_and_its_stop_hook() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(bin) = agent_bin("claude") else {
        return;
    };
    let mut s = RealSwarm::init(MCP_YAML, bin);
    s.claude(
        "coder",
        vec![
            Step::tool(
                "ToolSearch",
                json!({"query": "select:mcp__swarm__next,mcp__swarm__reply,mcp__swarm__done"}),
            ),
            Step::tool("mcp__swarm__next", json!({"wait_seconds": 0})),
            // The turn ends only once mail waits: the hook must catch it.
            Step::text("Nothing waits for me; ending the turn.").after("mail"),
            Step::tool("mcp__swarm__next", json!({"wait_seconds": 0})),
            Step::tool("mcp__swarm__reply", json!({"body": "the answer is 42"})),
            Step::tool("mcp__swarm__done", json!({})),
            Step::text("Answered."),
        ],
    );
    s.up();
    s.wait("coder's first turn ends", || s.reached("coder", 2));
    s.mail_then_open("coder", "what is the answer?", "mail");
    s.wait("coder answered and finished", || {
        s.reached("coder", 6) && s.completed("coder") == 1
    });

    // Claude Code defers MCP tools: a request names them (the server may
    // connect a moment after the first one) and its ToolSearch loads their
    // schemas into the requests after it.
    let named = |n: usize| {
        s.turn("coder", n)["body"]
            .to_string()
            .contains("mcp__swarm__send")
    };
    assert!(named(0) || named(1), "no request names the swarm tools");
    let tools = tool_names(&s.turn("coder", 3));
    for t in ["mcp__swarm__next", "mcp__swarm__done", "mcp__swarm__reply"] {
        assert!(tools.iter().any(|x| x == t), "no {t} in {tools:?}");
    }
    assert!(last_user_text(&s.turn("coder", 2)).contains("no_task"));
    let hooked = last_user_text(&s.turn("coder", 3));
    assert!(
        hooked.contains("New handoff mail is waiting for role coder"),
        "the continuation lacks the hook's reason:\n{hooked}"
    );
    // In the words of the tools it has, not the wrappers it lacks.
    assert!(
        hooked.contains("Call the swarm tool `next`") && !hooked.contains("ready_for_next.sh"),
        "{hooked}"
    );
    let took = last_user_text(&s.turn("coder", 4));
    assert!(took.contains("what is the answer?"), "{took}");
    // The reply reached the owner.
    s.owner_got("the answer is 42");
    let t = s.audit_and_transcript();
    assert!(
        t.contains("what is the answer?") && t.contains("the answer is 42"),
        "{t}"
    );
}

/// Every string in a request body, joined (for what a model was told,
/// wherever the CLI put it).
fn all_text(req: &Value) -> String {
    strings(&req["body"])
}

/// The response of the last function call in a Gemini API request.
fn last_function_response(req: &Value) -> String {
    req["body"]["contents"]
        .as_array()
        .and_then(|c| c.last())
        .map(|c| c["parts"].to_string())
        .unwrap_or_default()
}

const GEMINI_YAML: &str = r#"launch:
  stagger: 0ms
roles:
  - name: reviewer
    agent: gemini
    worktree: reviewer
    description: reviews what it is sent
    wake: queue
  - name: owner
    agent: human
"#;

/// Gemini CLI takes an item with `ready_for_next.sh` through its own shell
/// tool (`run_shell_command`), answers with `swarm_handoff.sh` and finishes
/// with `done_with_current.sh`; its primer reaches the model from GEMINI.md,
/// and its `AfterAgent` hook (`swarm hook gemini AfterAgent`) keeps it going
/// when mail arrived while it worked.
#[test]
fn gemini_cli_takes_answers_and_finishes_an_item_after_its_hook() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(bin) = agent_bin("gemini") else {
        return;
    };
    let mut s = RealSwarm::init(GEMINI_YAML, bin);
    let reviewer = s.wt("reviewer");
    s.gemini(
        "reviewer",
        vec![
            Step::shell("ready_for_next.sh"),
            // The turn ends only once mail waits: the hook must catch it.
            Step::text("Nothing waits for me; ending the turn.").after("sent"),
            Step::shell("ready_for_next.sh"),
            // auto_edit lets file edits through, not a compound command.
            Step::tool(
                "write_file",
                json!({"file_path": reviewer.join("answer.txt").display().to_string(),
                    "content": draft("owner", "looks good")}),
            ),
            Step::shell("swarm_handoff.sh answer.txt"),
            Step::shell("done_with_current.sh"),
            Step::text("Reviewed."),
        ],
    );
    s.up();
    s.wait("reviewer's first turn ends", || s.reached("reviewer", 1));
    s.mail_then_open("reviewer", "please review abc123", "sent");
    s.wait("reviewer answered and finished", || {
        s.reached("reviewer", 6) && s.completed("reviewer") == 1
    });

    let primer = s.d.swarm(&["prompt", "reviewer"]).stdout.clone();
    let first = s.turn("reviewer", 0);
    assert!(
        all_text(&first).contains(primer.trim()),
        "reviewer's request lacks its primer:\n{}",
        all_text(&first)
    );
    let idle = last_function_response(&s.turn("reviewer", 1));
    assert!(idle.contains("NO_TASK"), "turn 1 answered:\n{idle}");
    let hooked = last_function_response(&s.turn("reviewer", 2));
    assert!(
        hooked.contains("New handoff mail is waiting for role reviewer"),
        "the continuation lacks the hook's reason:\n{hooked}"
    );
    let took = last_function_response(&s.turn("reviewer", 3));
    assert!(
        took.contains("TASK:") && took.contains("please review abc123"),
        "{took}"
    );
    assert!(last_function_response(&s.turn("reviewer", 5)).contains("HANDOFF QUEUED:"));
    assert!(last_function_response(&s.turn("reviewer", 6)).contains("COMPLETED:"));
    let owner_new = hq(&s.d.root.join(".swarmforge/people/owner"), "inbox/new");
    s.wait("the answer is delivered to owner", || {
        !handoff_names(&owner_new).is_empty()
    });
    let t = s.audit_and_transcript();
    assert!(
        t.contains("please review abc123") && t.contains("looks good"),
        "{t}"
    );
}

/// One agent role `coder` running `agent` (with `extra` lines), woken
/// `idle` and re-woken about every second, and `notify.command` writing
/// each event into `<project>/notified`.
fn lone_yaml(agent: &str, extra: &str) -> String {
    format!(
        r#"launch:
  stagger: 0ms
wake:
  quiet: 500ms
daemon:
  sweep: 500ms
  ack_within: 1s
  rewake_cap: 2s
notify:
  command: printf '%s|%s|%s\n' "$SWARMFORGE_EVENT" "$SWARMFORGE_ROLE" "$SWARMFORGE_SUMMARY" >> "$SWARMFORGE_PROJECT/notified"
roles:
  - name: coder
    agent: {agent}
    worktree: coder
    description: implements each task
    wake: idle
{extra}  - name: owner
    agent: human
"#
    )
}

/// A new user's first `swarm up` of a real CLI in an untrusted worktree:
/// its trust dialog is `needs_input` within the deadline, stays on screen
/// through several held re-wake-ups (nothing is typed into it, so it never
/// answers "No"), and the person is notified once. Then `swarm trust`, and
/// the same swarm, restarted, does its work with nobody typing into a pane.
fn untrusted_then_trusted(cli: &str, extra: &str, setup: impl Fn(&RealSwarm, Vec<Step>)) {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(bin) = agent_bin(cli) else {
        return;
    };
    let mut s = RealSwarm::init(&lone_yaml(cli, extra), bin);
    setup(
        &s,
        vec![
            Step::shell("ready_for_next.sh"),
            Step::shell("done_with_current.sh"),
            Step::text("Done with the task."),
        ],
    );
    s.up_with(&[]);
    let coder = |s: &RealSwarm| s.status_of("coder");
    s.wait("the trust dialog is needs_input", || {
        coder(&s)["agent_state"] == "needs_input"
    });
    let prompt = coder(&s)["agent_prompt"].as_str().unwrap().to_string();
    assert!(
        prompt.contains("trust this folder") && prompt.contains("swarm trust"),
        "{prompt}"
    );
    s.d.send("owner", &draft("coder", "please add a --version flag"))
        .ok();
    let held = |s: &RealSwarm| {
        s.d.events()
            .iter()
            .filter(|e| e["recipient"] == "coder" && e["kind"] == "wake_held")
            .count()
    };
    s.wait("three re-wake-ups held", || held(&s) >= 3);
    // Of the trust dialog (a Claude Code role's first-start pages, met in
    // a never-used HOME and answered before, are notified each of its own).
    let notified = |s: &RealSwarm| {
        fs::read_to_string(s.d.path("notified"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("needs_input|coder|") && l.contains("trust"))
            .count()
    };
    s.wait("the person notified", || notified(&s) >= 1);
    // Still the dialog, the agent still running, never told anything.
    let c = coder(&s);
    assert_eq!(c["agent_state"], "needs_input", "{c}\n{}", s.panes());
    assert!(
        s.d.read(".swarmforge/run/coder.state")
            .starts_with("running"),
        "{}",
        s.panes()
    );
    assert!(!s.panes().contains("didn't start"), "{}", s.panes());
    assert!(s.model.turns("coder").is_empty(), "{}", s.model.dump());
    assert_eq!(notified(&s), 1);
    let kinds: Vec<Value> =
        s.d.events()
            .iter()
            .filter(|e| e["recipient"] == "coder")
            .map(|e| e["kind"].clone())
            .collect();
    assert!(
        !kinds.iter().any(|k| k == "woken" || k == "renotified"),
        "{kinds:?}"
    );

    // The person agrees; the same swarm restarted works untouched.
    let down = s.swarm(&["down"]);
    assert_eq!(down.code, 0, "{}", down.stderr);
    let t = s.swarm(&["trust"]);
    assert_eq!(t.code, 0, "{}", t.stderr);
    assert!(
        t.stdout.contains(&format!("coder ({cli}): ")),
        "{}",
        t.stdout
    );
    assert!(t.stdout.contains(": added"), "{}", t.stdout);
    if cli == "codex" {
        // The swarm's turn-end hook, with the hash Codex reports for it.
        assert!(
            t.stdout.contains("[hooks.state.") && t.stdout.contains("trusted_hash: added"),
            "{}",
            t.stdout
        );
    }
    s.swarm(&["trust", "--check"]).ok();
    s.up_with(&[]);
    s.wait("the task taken and done", || {
        s.reached("coder", 2) && s.completed("coder") == 1
    });
    s.audit_and_transcript();
}

#[test]
fn claude_code_in_an_untrusted_worktree_waits_for_a_person_until_swarm_trust() {
    untrusted_then_trusted("claude", "", |s, steps| s.claude("coder", steps));
}

#[test]
fn codex_in_an_untrusted_worktree_waits_for_a_person_until_swarm_trust() {
    let extra = format!("    args: {}\n", codex_args("coder"));
    untrusted_then_trusted("codex", &extra, |s, steps| s.codex("coder", steps));
}

#[test]
fn gemini_cli_in_an_untrusted_worktree_waits_for_a_person_until_swarm_trust() {
    untrusted_then_trusted("gemini", "", |s, steps| s.gemini("coder", steps));
}

/// `GEMINI_CLI_TRUSTED_FOLDERS_PATH` moves Gemini CLI's trust out of
/// `~/.gemini` (its docs, cli/trusted-folders.md): `swarm trust` records the
/// worktree there, `trust --check` reads it there, and the confined Gemini
/// CLI, whose private home would hide the file, reads it too and works with
/// nobody at a trust dialog.
#[test]
fn gemini_cli_trust_at_its_trusted_folders_path_reaches_the_confined_cli() {
    if !require_tool("tmux", "apt-get install -y tmux") || crate::support::require_bwrap().is_none()
    {
        return;
    }
    let Some(bin) = agent_bin("gemini") else {
        return;
    };
    let mut s = RealSwarm::init(&lone_yaml("gemini", ""), bin);
    let file = s.home.path().join("elsewhere/trust.json");
    s.env
        .push(("GEMINI_CLI_TRUSTED_FOLDERS_PATH".into(), file.clone()));
    s.gemini(
        "coder",
        vec![
            Step::shell("ready_for_next.sh"),
            Step::shell("done_with_current.sh"),
            Step::text("Done with the task."),
        ],
    );
    let untrusted = |s: &RealSwarm| {
        s.swarm(&["doctor", "--json"])
            .json()
            .to_string()
            .contains("AGENT_CLI_UNTRUSTED")
    };
    assert!(untrusted(&s));
    let t = s.swarm(&["trust"]);
    assert_eq!(t.code, 0, "{}", t.stderr);
    let kept = fs::read_to_string(&file).unwrap();
    assert!(
        kept.contains(&s.wt("coder").display().to_string()),
        "{kept}"
    );
    assert!(!s.home.path().join(".gemini/trustedFolders.json").exists());
    s.swarm(&["trust", "--check"]).ok();
    assert!(!untrusted(&s));
    s.up_with(&[]);
    s.d.send("owner", &draft("coder", "please add a --version flag"))
        .ok();
    s.wait("the task taken and done", || {
        s.reached("coder", 2) && s.completed("coder") == 1
    });
    s.audit_and_transcript();
}

/// `mcp: true` with the real `cli`: the role takes, answers and finishes an
/// item through `swarm mcp`'s tools (named `<prefix>next`, …, as the CLI
/// offers MCP tools to its model), its primer teaching those tools.
///
/// `hook_review`: the CLI first asks a person to trust the swarm's turn-end
/// hook (Codex, whose hooks live in the role's `CODEX_HOME`); the swarm
/// shows that as `needs_input`, and the person answers it with `swarm
/// attach --choose`.
fn mcp_round_trip(
    cli: &str,
    extra: &str,
    prefix: &str,
    hook_review: bool,
    setup: impl Fn(&RealSwarm, Vec<Step>),
) {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(bin) = agent_bin(cli) else {
        return;
    };
    let yaml = format!(
        "launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: {cli}\n    worktree: coder\n    description: answers questions\n    wake: queue\n    mcp: true\n{extra}  - name: owner\n    agent: human\n"
    );
    let mut s = RealSwarm::init(&yaml, bin);
    let t = |n: &str| format!("{prefix}{n}");
    setup(
        &s,
        vec![
            Step::tool(&t("next"), json!({"wait_seconds": 0})).after("mail"),
            Step::tool(&t("reply"), json!({"body": "the answer is 42"})),
            Step::tool(&t("done"), json!({})),
            Step::text("Answered."),
        ],
    );
    s.up();
    if hook_review {
        s.wait("the hook review is needs_input", || {
            s.status_of("coder")["agent_prompt"]
                .as_str()
                .is_some_and(|p| p.contains("turn-end hook"))
        });
        let c = s.status_of("coder");
        let opts = c["agent_options"].as_array().unwrap();
        let n = 1 + opts
            .iter()
            .position(|o| o["label"].as_str().unwrap().contains("Trust all"))
            .unwrap_or_else(|| panic!("{c}"));
        s.swarm(&["attach", "coder", "--choose", &n.to_string()])
            .ok();
    }
    s.mail_then_open("coder", "what is the answer?", "mail");
    s.wait("coder answered and finished", || {
        s.reached("coder", 3) && s.completed("coder") == 1
    });
    let first = all_text(&s.turn("coder", 0));
    assert!(
        first.contains("Call `next`") && !first.contains("swarm_handoff.sh"),
        "the primer does not teach the tools:\n{first}"
    );
    let took = all_text(&s.turn("coder", 1));
    assert!(took.contains("what is the answer?"), "{took}");
    s.owner_got("the answer is 42");
    s.audit_and_transcript();
}

#[test]
fn codex_takes_work_through_swarm_mcp() {
    let extra = format!("    args: {}\n", codex_args("coder"));
    // `swarm up --trust` trusted the turn-end hook too: no hook review.
    mcp_round_trip("codex", &extra, "mcp__swarm/", false, |s, steps| {
        s.codex("coder", steps)
    });
}

#[test]
fn gemini_cli_takes_work_through_swarm_mcp() {
    mcp_round_trip("gemini", "", "mcp_swarm_", false, |s, steps| {
        s.gemini("coder", steps)
    });
}

/// Debian's bubblewrap as `.ci/run` unpacks it (`target/bubblewrap`; a
/// test puts a copy first on its own PATH, whether or not the machine has a
/// system one), or None after a NOTE (a failure in CI).
#[track_caller]
fn debian_bwrap() -> Option<PathBuf> {
    let bwrap = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bubblewrap/usr/bin/bwrap");
    let probe = std::process::Command::new(&bwrap)
        .arg("--version")
        .output()
        .map_err(|e| format!("{}: {e}", bwrap.display()))
        .and_then(|o| {
            if o.status.success() {
                Ok(bwrap.clone())
            } else {
                Err(String::from_utf8_lossy(&o.stderr).into_owned())
            }
        });
    require_capability(
        "run Debian's bubblewrap from target/bubblewrap",
        "run .ci/run, which unpacks Debian's bubblewrap package there (apt-get download bubblewrap)",
        probe,
    )
}

/// A folder outside the temp folder holding `bwrap`: a script that logs each
/// call and runs Debian's (so a test sees a CLI chose the bwrap on PATH).
pub(crate) struct BwrapOnPath {
    pub(crate) dir: tempfile::TempDir,
    log: PathBuf,
    /// `.swarmforge/agents`, whose `<role>/home` is a confined agent's HOME.
    agents: Option<PathBuf>,
}

impl BwrapOnPath {
    fn new(real: &Path, log: PathBuf, base: Option<&Path>) -> BwrapOnPath {
        use std::os::unix::fs::PermissionsExt;
        let dir = user_dir_in(base);
        // A copy beside the script: the real one may sit under /tmp (a
        // checkout there), which a confined agent's private /tmp hides.
        let copy = dir.path().join("bwrap-real");
        fs::copy(real, &copy).unwrap();
        fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
        let script = dir.path().join("bwrap");
        fs::write(
            &script,
            format!(
                "#!/bin/sh\necho called >> '{}'\nexec '{}' \"$@\"\n",
                log.display(),
                copy.display()
            ),
        )
        .unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        BwrapOnPath {
            dir,
            log,
            agents: None,
        }
    }

    /// Some CLI ran it (unconfined, or confined: the log in its home).
    fn called(&self) -> bool {
        let name = self.log.file_name().unwrap();
        let homes = self
            .agents
            .iter()
            .flat_map(|a| fs::read_dir(a).into_iter().flatten().flatten())
            .map(|e| e.path().join("home").join(name));
        std::iter::once(self.log.clone())
            .chain(homes)
            .any(|f| fs::read_to_string(f).is_ok_and(|l| l.contains("called")))
    }
}

/// On a machine with Debian's bubblewrap on PATH (as on most desktops,
/// where Flatpak pulls it in), Codex's sandbox takes that bwrap, and a
/// Codex role still runs its commands, inside the sandbox, with nobody
/// typing: HOME and the project are where a user keeps them, outside the
/// temp folder (docs/agents.md "Codex and bubblewrap"). Failed before HOME
/// moved out of /tmp: `bwrap: execvp codex-linux-sandbox`.
#[test]
fn codex_works_with_debian_bubblewrap_on_path() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let (Some(bin), Some(real)) = (agent_bin("codex"), debian_bwrap()) else {
        return;
    };
    let yaml = format!(
        r#"launch:
  stagger: 0ms
roles:
  - name: coder
    agent: codex
    worktree: coder
    description: implements each task
    wake: queue
    args: {}
  - name: owner
    agent: human
"#,
        codex_args("coder")
    );
    let mut s = RealSwarm::init(&yaml, bin);
    let bwrap = s.bwrap_on_path(&real);
    s.codex(
        "coder",
        vec![
            Step::shell("ready_for_next.sh"),
            // Outside the workspace: the sandbox must refuse it.
            Step::shell("touch /etc/swarm-sandbox-probe"),
            Step::shell(&format!(
                "printf '{}' > answer.txt && swarm_handoff.sh answer.txt",
                draft("owner", "sandboxed and done").replace('\n', "\\n")
            )),
            Step::shell("done_with_current.sh"),
            Step::text("Done."),
        ],
    );
    // Queued before `swarm up`, which returns only once the agent outlived
    // its start window (issue 42.2): the agent's first turn finds the task.
    s.d.send("owner", &draft("coder", "run inside your sandbox"))
        .ok();
    // `swarm up` sees nothing wrong: CODEX_HOME is not in the temp folder.
    let r = s.swarm(&["up", "--detach", "--trust"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stderr.contains("codex-linux-sandbox"), "{}", r.stderr);
    s.guard.socket = Some(PathBuf::from(s.d.read(".swarmforge/tmux-socket").trim()));
    s.wait("coder finished its item", || {
        s.reached("coder", 4) && s.completed("coder") == 1
    });
    let took = last_output(&s.turn("coder", 1));
    assert!(took.contains("TASK:"), "{took}");
    let probe = last_output(&s.turn("coder", 2));
    assert!(
        probe.contains("Read-only file system") || probe.contains("Permission denied"),
        "a write outside the workspace was not refused: {probe}"
    );
    assert!(!Path::new("/etc/swarm-sandbox-probe").exists());
    for n in [1, 3, 4] {
        let out = last_output(&s.turn("coder", n));
        assert!(!out.contains("execvp"), "step {n}: {out}");
    }
    assert!(last_output(&s.turn("coder", 3)).contains("HANDOFF QUEUED:"));
    assert!(last_output(&s.turn("coder", 4)).contains("COMPLETED:"));
    assert!(bwrap.called(), "Codex never called the bwrap on PATH");
    s.owner_got("sandboxed and done");
    s.audit_and_transcript();
}

/// `swarm doctor` and `swarm up` name the one layout where Codex's sandbox
/// cannot work: a CODEX_HOME in the temp folder with a system bwrap on
/// PATH; a HOME outside it, or `permission: full`, is fine.
#[test]
fn doctor_names_a_codex_home_in_the_temp_folder_with_bubblewrap_on_path() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        "roles:\n  - name: coder\n    agent: codex\n    worktree: coder\n  - name: boss\n    agent: codex\n    worktree: boss\n    permission: full\n",
    );
    p.swarm(&["init"]).ok();
    let bwrap_dir = user_dir();
    let bwrap = bwrap_dir.path().join("bwrap");
    fs::write(&bwrap, "#!/bin/sh\nexit 0\n").unwrap();
    fs::set_permissions(&bwrap, fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bwrap_dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let tmp_home = tempfile::tempdir().unwrap();
    let user_home = user_dir();
    let doctor = |home: &Path, path: &str| {
        let r = p
            .cmd("swarm")
            .args(["doctor", "--json"])
            .env("HOME", home)
            .env("CODEX_HOME", "")
            .env("TMPDIR", "")
            .env("PATH", path)
            .run();
        crate::support::doctor_findings(&r.json(), "CODEX_SANDBOX_HELPER")
    };
    let found = doctor(tmp_home.path(), &path);
    assert_eq!(found.len(), 1, "{found:?}");
    let msg = found[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("role coder") && msg.contains(&bwrap.display().to_string()),
        "{msg}"
    );
    assert!(found[0]["fix"].as_str().unwrap().contains("CODEX_HOME"));
    // A user's real HOME, or no bwrap on PATH (the machine's PATH without
    // any, as it may have one): nothing to say.
    assert!(doctor(user_home.path(), &path).is_empty());
    let no_bwrap = crate::support::path_without("bwrap");
    assert!(doctor(tmp_home.path(), &no_bwrap.path).is_empty());
    // `swarm up` warns before it starts anything (here it then stops: no
    // codex on PATH).
    let r = p
        .cmd("swarm")
        .args(["up", "--detach"])
        .env("HOME", tmp_home.path())
        .env("CODEX_HOME", "")
        .env("TMPDIR", "")
        .env("PATH", &path)
        .run();
    assert!(
        r.stderr
            .contains("warning: role coder: every shell command of Codex will fail"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("role boss"), "{}", r.stderr);
}

/// Codex's `Stop` hook (`swarm hook codex Stop`), trusted by `swarm up
/// --trust` with the hash Codex's own app server reports, keeps a Codex
/// role going when mail arrived while it worked: the continuation carries
/// the hook's reason, and nobody typed into the pane (no hook review).
#[test]
fn codex_stop_hook_trusted_by_swarm_trust_continues_a_turn_when_mail_waits() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(bin) = agent_bin("codex") else {
        return;
    };
    let extra = format!("    args: {}\n", codex_args("coder"));
    let mut s = RealSwarm::init(&lone_yaml("codex", &extra), bin);
    s.codex(
        "coder",
        vec![
            Step::shell("ready_for_next.sh"),
            // The turn ends only once mail waits: the hook must catch it.
            Step::text("Nothing waits for me; ending the turn.").after("mail"),
            Step::shell("ready_for_next.sh"),
            Step::shell("done_with_current.sh"),
            Step::text("Done."),
        ],
    );
    s.up();
    s.wait("coder's first command ran", || s.reached("coder", 1));
    s.mail_then_open("coder", "please add a --version flag", "mail");
    s.wait("coder took and finished the task", || {
        s.reached("coder", 4) && s.completed("coder") == 1
    });
    let hooked = input_text(&s.turn("coder", 2));
    assert!(
        hooked.contains("New handoff mail is waiting for role coder"),
        "the continuation lacks the hook's reason:\n{hooked}"
    );
    let took = last_output(&s.turn("coder", 3));
    assert!(took.contains("please add a --version flag"), "{took}");
    assert!(!s.panes().contains("Hooks need review"), "{}", s.panes());
    s.audit_and_transcript();
}

/// As an ordinary user (not root, as CI runs), with Debian's bubblewrap on
/// PATH: Claude Code (`permission: full`, which it refuses as root), Codex (its sandbox on, nested through unprivileged
/// user namespaces) and Gemini CLI each take an item and answer it, after
/// `swarm up --trust` run by that user for its own HOME. Codex's sandbox is
/// seen refusing a write to the user's own HOME, which the user could make
/// (docs/agents.md "Running as an ordinary user").
#[test]
fn the_three_presets_work_as_an_ordinary_user_with_bubblewrap_on_path() {
    if !require_tool("tmux", "apt-get install -y tmux")
        || !require_tool("setpriv", "apt-get install -y util-linux")
    {
        return;
    }
    // That user's own copies: the CLIs it installed with npm, the
    // binaries it installed; nothing of the checkout's, which may sit in a
    // home only its owner can enter.
    let (Some(user), Some(real)) = (crate::support::account(), debian_bwrap()) else {
        return;
    };
    let Some(bin) = user.agent_clis() else {
        return;
    };
    let yaml = format!(
        r#"launch:
  stagger: 0ms
roles:
  - name: coder
    agent: claude
    worktree: coder
    description: implements each task
    wake: queue
    permission: full
  - name: tester
    agent: codex
    worktree: tester
    description: tests each change
    wake: queue
    args: {}
  - name: reviewer
    agent: gemini
    worktree: reviewer
    description: reviews what it is sent
    wake: queue
  - name: owner
    agent: human
"#,
        codex_args("tester")
    );
    let mut s = RealSwarm::init_in(&yaml, bin, Some(user.home.clone()));
    let bwrap = s.bwrap_on_path(&real);
    let coder = s.wt("coder");
    let reviewer = s.wt("reviewer");
    s.claude(
        "coder",
        vec![
            Step::shell("ready_for_next.sh"),
            claude_write(&coder, "answer.txt", &draft("owner", "coded as swarm-user")),
            Step::shell("swarm_handoff.sh answer.txt"),
            Step::shell("done_with_current.sh"),
            Step::text("Done."),
        ],
    );
    let probe = s.home.path().join("sandbox-probe");
    s.codex(
        "tester",
        vec![
            Step::shell("ready_for_next.sh"),
            Step::shell(&format!("touch '{}'", probe.display())),
            Step::shell(&format!(
                "printf '{}' > answer.txt && swarm_handoff.sh answer.txt",
                draft("owner", "tested as swarm-user").replace('\n', "\\n")
            )),
            Step::shell("done_with_current.sh"),
            Step::text("Done."),
        ],
    );
    s.gemini(
        "reviewer",
        vec![
            Step::shell("ready_for_next.sh"),
            Step::tool(
                "write_file",
                json!({"file_path": reviewer.join("answer.txt").display().to_string(),
                    "content": draft("owner", "reviewed as swarm-user")}),
            ),
            Step::shell("swarm_handoff.sh answer.txt"),
            Step::shell("done_with_current.sh"),
            Step::text("Reviewed."),
        ],
    );
    // The owner's mail waits before the agents start.
    for role in ["coder", "tester", "reviewer"] {
        s.d.send("owner", &draft(role, &format!("please take this, {role}")))
            .ok();
    }
    s.as_ordinary_user(&user, &[bwrap.dir.path()]);
    // The swarm's own sandbox: that user's copy of Debian's bwrap (the
    // one the tests name lies in the checkout).
    s.env
        .push(("SWARM_BWRAP".into(), bwrap.dir.path().join("bwrap-real")));
    s.up_with(&["--trust"]);
    s.wait("each agent finished its item", || {
        s.reached("coder", 4)
            && s.reached("tester", 4)
            && s.reached("reviewer", 4)
            && ["coder", "tester", "reviewer"]
                .iter()
                .all(|r| s.completed(r) == 1)
    });
    let seen = || format!("--- model requests:\n{}", s.model.dump());
    assert!(
        last_user_text(&s.turn("coder", 1)).contains("please take this, coder"),
        "{}",
        seen()
    );
    assert!(
        last_output(&s.turn("tester", 1)).contains("please take this, tester"),
        "{}",
        seen()
    );
    assert!(
        last_function_response(&s.turn("reviewer", 1)).contains("please take this, reviewer"),
        "{}",
        seen()
    );
    let refused = last_output(&s.turn("tester", 2));
    assert!(
        refused.contains("Read-only file system") || refused.contains("Permission denied"),
        "Codex's sandbox let a write outside the workspace through: {refused}\n{}",
        seen()
    );
    assert!(!probe.exists());
    assert!(bwrap.called(), "Codex never called the bwrap on PATH");
    let owner_new = hq(&s.d.root.join(".swarmforge/people/owner"), "inbox/new");
    s.wait("three answers reach owner", || {
        handoff_names(&owner_new).len() == 3
    });
    if let Some((uid, _)) = user.ids {
        use std::os::unix::fs::MetadataExt;
        for name in handoff_names(&owner_new) {
            let owner = fs::metadata(owner_new.join(&name)).unwrap().uid();
            assert_eq!(owner, uid, "{name} was not written by the ordinary user");
        }
    }
    let audit = s.swarm(&["audit", "--check"]);
    assert_eq!(audit.code, 0, "{}\n{}", audit.stdout, audit.stderr);
    let down = s.swarm(&["down"]);
    assert_eq!(down.code, 0, "{}\n{}", down.stdout, down.stderr);
}

/// Claude Code with its own sandbox on (`sandbox.enabled` in the user's
/// settings; on Linux it runs each shell command in bubblewrap, with socat
/// for its network proxy): the wrappers still take, answer and finish an
/// item from inside it; the sandbox is seen on in what Claude tells its
/// model and in the calls of the bwrap on PATH (docs/agents.md "Each CLI's
/// own sandbox").
#[test]
fn claude_code_with_its_own_sandbox_on_takes_and_answers_an_item() {
    if !require_tool("tmux", "apt-get install -y tmux")
        || !require_tool("socat", "apt-get install -y socat")
    {
        return;
    }
    let (Some(bin), Some(real)) = (agent_bin("claude"), debian_bwrap()) else {
        return;
    };
    let mut s = RealSwarm::init(
        "launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: claude\n    worktree: coder\n    description: implements each task\n    wake: queue\n  - name: owner\n    agent: human\n",
        bin,
    );
    let bwrap = s.bwrap_on_path(&real);
    fs::create_dir_all(s.home.path().join(".claude")).unwrap();
    // As root, Claude's bubblewrap cannot mount a /proc of its own inside
    // the swarm's sandbox: the person chooses its weaker nested mode
    // (docs/security.md, "The coding CLIs inside"); as an ordinary user it
    // nests as it is.
    let root = swarm_handoff::launch::agents::claude_root::euid() == 0;
    fs::write(
        s.home.path().join(".claude/settings.json"),
        json!({"sandbox": {"enabled": true, "failIfUnavailable": true,
            "enableWeakerNestedSandbox": root}})
        .to_string(),
    )
    .unwrap();
    let coder = s.wt("coder");
    s.claude(
        "coder",
        vec![
            Step::shell("ready_for_next.sh"),
            claude_write(
                &coder,
                "answer.txt",
                &draft("owner", "answered from Claude's sandbox"),
            ),
            Step::shell("swarm_handoff.sh answer.txt"),
            Step::shell("done_with_current.sh"),
            Step::text("Done."),
        ],
    );
    s.d.send("owner", &draft("coder", "please work in your sandbox"))
        .ok();
    s.up();
    s.wait("coder finished its item", || {
        s.reached("coder", 4) && s.completed("coder") == 1
    });
    assert!(last_user_text(&s.turn("coder", 1)).contains("please work in your sandbox"));
    assert!(
        strings(&s.turn("coder", 0)).contains("Bash commands run inside an OS-level sandbox"),
        "Claude Code did not say its sandbox is on"
    );
    assert!(
        bwrap.called(),
        "Claude Code never ran its sandbox (bwrap on PATH)"
    );
    assert!(last_user_text(&s.turn("coder", 3)).contains("HANDOFF QUEUED:"));
    assert!(last_user_text(&s.turn("coder", 4)).contains("COMPLETED:"));
    s.owner_got("answered from Claude's sandbox");
    s.audit_and_transcript();
}

/// The escape attempts of [`a_confined_cli_works_and_cannot_write_outside`],
/// as a script in the agent's worktree: each line of its output is
/// `<what>=DONE` or `<what>=REFUSED` (words not in the script, so a
/// request that only quotes the command cannot pass).
fn escape_script(s: &RealSwarm, loaded: &[&str]) -> String {
    let root = s.d.root.display().to_string();
    let victim = hq(&s.wt("victim"), "inbox/new").display().to_string();
    let home = s.home.path().display().to_string();
    format!(
        r#"r() {{ if ( eval "$2" ) >/dev/null 2>&1; then echo "$1=DONE"; else echo "$1=REFUSED"; fi; }}
r inbox 'echo x >"{victim}/50_20260101T000000Z_000001_from_owner_to_victim.handoff"'
r approval 'echo sha256: x >"{root}/.swarmforge/approvals/20260101T000000Z_000001_from_coder"'
r unpause 'rm "{root}/.swarmforge/paused"'
r token 'cat "{root}/.swarmforge/serve/token"'
r person_home 'echo x >"{home}/planted" && test -f "{home}/.bashrc-of-the-person"'
r own 'echo x >own.txt'
r git_main 'git update-ref refs/heads/master HEAD'
r git_other 'git update-ref -d refs/heads/swarmforge-victim'
r commit 'git add own.txt && git -c user.name=c -c user.email=c@invalid commit -qm own-commit'
{}"#,
        plant_lines(s, loaded)
    )
}

/// What the person's own sessions of a CLI load from its state folder
/// (docs/security.md, "Confinement"): a path ending in `/` is a folder.
fn loaded_by(cli: &str) -> &'static [&'static str] {
    match cli {
        "claude" => &[
            ".claude/settings.json",
            ".claude/CLAUDE.md",
            ".claude/plugins/",
            ".claude/commands/",
            ".claude/agents/",
            ".claude/skills/",
            ".claude/output-styles/",
            ".claude/rules/",
            ".claude/hooks/",
        ],
        "codex" => &[
            ".codex/config.toml",
            ".codex/AGENTS.md",
            ".codex/AGENTS.override.md",
            ".codex/rules/",
            ".codex/prompts/",
            ".codex/skills/",
            ".codex/plugins/",
            ".codex/hooks/",
        ],
        _ => &[
            ".gemini/settings.json",
            ".gemini/GEMINI.md",
            ".gemini/trustedFolders.json",
            ".gemini/extensions/",
            ".gemini/commands/",
            ".gemini/agents/",
            ".gemini/skills/",
            ".gemini/policies/",
            ".gemini/hooks/",
        ],
    }
}

/// One `r plant:<path>` line per path of [`loaded_by`]: append to the
/// file, or make a file in the folder.
fn plant_lines(s: &RealSwarm, loaded: &[&str]) -> String {
    loaded
        .iter()
        .map(|rel| {
            let at = s.home.path().join(rel.trim_end_matches('/'));
            let cmd = match rel.ends_with('/') {
                true => format!("echo planted-by-the-agent >\"{}/planted.md\"", at.display()),
                false => format!("echo planted-by-the-agent >>\"{}\"", at.display()),
            };
            format!("r plant:{rel} '{cmd}'\n")
        })
        .collect()
}

/// The real `cli`, confined (the default: no `confine:` in swarm.yaml),
/// started as a user would (`swarm up --trust`), with its sandbox off
/// (`permission: full`, or for Claude Code as root an allow rule for the
/// one script) so only the swarm's confinement stands between it and the
/// project: it takes an item, runs a script that tries to write another
/// role's inbox, an approval, the pause, the person's home, each place of
/// its CLI's folder the person's own sessions load ([`loaded_by`]), and to
/// read the cockpit token, and finishes the item. Each attempt is refused, its own
/// write lands, and the audit is clean.
fn a_confined_cli_works_and_cannot_write_outside(
    cli: &str,
    extra: &str,
    setup: impl Fn(&RealSwarm, Vec<Step>),
) {
    if !require_tool("tmux", "apt-get install -y tmux") || crate::support::require_bwrap().is_none()
    {
        return;
    }
    let Some(bin) = agent_bin(cli) else {
        return;
    };
    let yaml = format!(
        "launch:\n  stagger: 0ms\nroles:\n  - name: coder\n    agent: {cli}\n    worktree: coder\n    wake: queue\n{extra}  - name: victim\n    agent: human\n    worktree: victim\n  - name: owner\n    agent: human\n"
    );
    let mut s = RealSwarm::init(&yaml, bin);
    fs::write(s.home.path().join(".bashrc-of-the-person"), "# theirs\n").unwrap();
    setup(
        &s,
        vec![
            Step::shell("ready_for_next.sh"),
            Step::shell("sh escape.sh"),
            Step::shell("done_with_current.sh"),
            Step::text("Done with the task."),
        ],
    );
    let coder = s.wt("coder");
    // What the person's own sessions of its CLI load: settings, plugins,
    // commands, rules, memory.
    let loaded = loaded_by(cli);
    fs::write(coder.join("escape.sh"), escape_script(&s, loaded)).unwrap();
    s.swarm(&["pause", "--type", "post"]).ok();
    s.d.write(".swarmforge/serve/token", "cockpit-secret\n");
    // Queued before `swarm up`, which returns only once the agent outlived
    // its start window (issue 42.2): the agent's first turn finds the task.
    s.d.send("owner", &draft("coder", "please add a --version flag"))
        .ok();
    s.up();
    assert!(
        s.d.read(".swarmforge/run/coder.sh").contains("bwrap"),
        "the pane does not run the agent confined:\n{}",
        s.d.read(".swarmforge/run/coder.sh")
    );
    s.wait("the task taken and done", || {
        s.reached("coder", 3) && s.completed("coder") == 1
    });
    let seen = all_text(&s.turn("coder", 2));
    let planted = loaded.iter().map(|rel| format!("plant:{rel}"));
    for what in [
        "inbox",
        "approval",
        "unpause",
        "token",
        "person_home",
        "git_main",
        "git_other",
    ]
    .map(String::from)
    .into_iter()
    .chain(planted)
    {
        assert!(
            seen.contains(&format!("{what}=REFUSED")),
            "{what} was not refused:\n{seen}"
        );
    }
    assert!(seen.contains("own=DONE"), "{seen}");
    assert!(coder.join("own.txt").is_file());
    // Its commit moved its own branch only (docs/security.md "Branches").
    assert!(seen.contains("commit=DONE"), "{seen}");
    let git = |args: &[&str]| crate::support::git(&s.d.root, args);
    assert_eq!(
        git(&["log", "-1", "--format=%s", "swarmforge-coder"]),
        "own-commit"
    );
    assert_ne!(git(&["log", "-1", "--format=%s", "master"]), "own-commit");
    assert!(git(&["rev-parse", "--verify", "-q", "swarmforge-victim"]).len() >= 40);
    assert!(s.d.root.join(".swarmforge/paused").exists());
    assert!(!s.home.path().join("planted").exists());
    for rel in loaded {
        let at = s.home.path().join(rel.trim_end_matches('/'));
        match rel.ends_with('/') {
            true => assert!(!at.join("planted.md").exists(), "{rel}"),
            false => {
                let theirs = fs::read_to_string(&at).unwrap_or_default();
                assert!(!theirs.contains("planted-by-the-agent"), "{rel}: {theirs}");
            }
        }
    }
    assert!(handoff_names(&hq(&s.wt("victim"), "inbox/new")).is_empty());
    assert!(!s
        .d
        .root
        .join(".swarmforge/approvals/20260101T000000Z_000001_from_coder")
        .exists());
    s.audit_and_transcript();
    s.swarm(&["status"]).ok();
}

#[test]
fn a_confined_claude_code_works_and_cannot_write_outside() {
    // As root Claude Code refuses bypassPermissions: the person allows the
    // one script in the worktree's local settings (which `swarm up` merges
    // its hook into) instead.
    a_confined_cli_works_and_cannot_write_outside("claude", "", |s, steps| {
        s.claude("coder", steps);
        allow_in(
            &s.wt("coder").join(".claude/settings.local.json"),
            &["permissions", "allow"],
            "Bash(sh escape.sh)",
        );
    });
}

#[test]
fn a_confined_codex_works_and_cannot_write_outside() {
    let extra = format!("    permission: full\n    args: {}\n", codex_args("coder"));
    a_confined_cli_works_and_cannot_write_outside("codex", &extra, |s, steps| {
        s.codex("coder", steps)
    });
}

#[test]
fn a_confined_gemini_cli_works_and_cannot_write_outside() {
    // Gemini CLI's policy refuses a command outside `tools.allowed` even in
    // yolo mode once that list exists (`swarm up` adds the wrappers to it).
    a_confined_cli_works_and_cannot_write_outside(
        "gemini",
        "    permission: full\n",
        |s, steps| {
            s.gemini("coder", steps);
            allow_in(
                &s.wt("coder").join(".gemini/settings.json"),
                &["tools", "allowed"],
                "run_shell_command(sh escape.sh)",
            );
        },
    );
}

/// Adds `rule` to the list at `keys` in the JSON settings file `f`
/// (created when missing).
pub(crate) fn allow_in(f: &Path, keys: &[&str], rule: &str) {
    let mut v: Value = fs::read_to_string(f)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    let mut at = &mut v;
    for k in keys {
        if at.get(*k).is_none() {
            at[*k] = json!({});
        }
        at = &mut at[*k];
    }
    if !at.is_array() {
        *at = json!([]);
    }
    at.as_array_mut().unwrap().push(json!(rule));
    fs::create_dir_all(f.parent().unwrap()).unwrap();
    fs::write(f, v.to_string()).unwrap();
}
