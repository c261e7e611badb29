//! `swarm doctor` tells the truth in every state (issue 42, docs/doctor.md):
//! nothing found on a healthy running swarm, in tmux and headless; a
//! pointer to the tmux socket read as a pointer; a broken swarm.yaml or
//! roles.tsv as one `CONFIG_INVALID` finding while the other checks run;
//! before `swarm init` a `NOT_INITIALISED` finding and the checks that need
//! no project; each agent's sandbox tried the way `swarm up` builds it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::{
    doctor_findings, require_bwrap, require_tool, wait_until, Project, SwarmGuard,
};

const WAIT: Duration = Duration::from_secs(40);

/// A scripted agent: takes what waits, finishes it, exits 0 (`idle`).
const AGENT: &str = "out=$(ready-next 2>&1)\ncase \"$out\" in *NO_TASK*) ;; *) done-current >/dev/null 2>&1 ;; esac\nexit 0\n";

/// The person `lead` and the scripted agent `coder` in its own worktree.
fn yaml(p: &Project, extra: &str) -> String {
    p.write("agents/coder.sh", AGENT);
    format!(
        "launch:\n  stagger: 0ms\n{extra}roles:\n  - name: lead\n    agent: human\n  - name: coder\n    agent: sh \"$SWARMFORGE_PROJECT/agents/coder.sh\"\n    worktree: coder\n    mode: batch\n"
    )
}

/// Every finding of a report.
fn findings(v: &Value) -> Vec<Value> {
    v["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("no checks in {v}"))
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().clone())
        .collect()
}

fn codes(v: &Value) -> Vec<String> {
    findings(v)
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

/// The names of the checks that ran.
fn checks(v: &Value) -> Vec<String> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap().to_string())
        .collect()
}

/// `swarm doctor --json` with extra environment: (exit code, report).
fn doctor(p: &Project, env: &[(&str, &str)]) -> (i32, Value) {
    let mut c = p.cmd("swarm").args(["doctor", "--json"]);
    for (k, v) in env {
        c = c.env(k, v);
    }
    let r = c.run();
    (r.code, r.json())
}

fn coder_state(p: &Project) -> String {
    let st = p.swarm(&["status", "--json"]).json();
    st["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "coder")
        .map(|r| r["agent_state"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// An executable script at `path`.
fn script(path: &Path, text: &str) -> PathBuf {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// `program` as a path: as it is when it names a folder, else found on PATH.
fn on_path(program: &Path) -> PathBuf {
    if program.components().count() > 1 {
        return program.to_path_buf();
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{} on PATH", program.display()))
}

/// A folder holding links to `tools` (found on this PATH) and nothing else:
/// a PATH without the agent CLIs or tmux, whatever this machine has.
fn path_with(dir: &Path, tools: &[&str]) -> String {
    fs::create_dir_all(dir).unwrap();
    for t in tools {
        std::os::unix::fs::symlink(on_path(Path::new(t)), dir.join(t)).unwrap();
    }
    dir.display().to_string()
}

/// A running tmux swarm of a scripted agent and a person: not one finding,
/// the tmux socket's pointer included (it was tested as if it were the
/// socket, so every healthy tmux swarm got TMUX_SOCKET_STALE); each check
/// says `ok`.
#[test]
fn a_healthy_tmux_swarm_gets_no_finding() {
    if !require_tool("tmux", "apt-get install -y tmux") || require_bwrap().is_none() {
        return;
    }
    let p = Project::empty();
    p.write("swarm.yaml", &yaml(&p, ""));
    let mut guard = SwarmGuard::new(&p.root);
    let up = p.cmd("swarm").args(["up", "--detach"]).run();
    assert_eq!(up.code, 0, "{}\n{}", up.stdout, up.stderr);
    guard.socket = Some(PathBuf::from(p.read(".swarmforge/tmux-socket").trim()));
    wait_until(WAIT, "coder idle", || coder_state(&p) == "idle");
    let (code, v) = doctor(&p, &[]);
    assert_eq!((code, codes(&v)), (0, vec![]), "{v:#}");
    assert_eq!(v["healthy"], true);
    let text = p.swarm(&["doctor"]);
    text.ok()
        .stdout_has("ok       tmux_socket\n")
        .stdout_has("ok       confinement\n")
        .stdout_has("healthy: ");
}

/// The same swarm headless: not one finding (the sandbox trial included).
#[test]
fn a_healthy_headless_swarm_gets_no_finding() {
    if require_bwrap().is_none() {
        return;
    }
    let p = Project::empty();
    p.write("swarm.yaml", &yaml(&p, ""));
    let _guard = SwarmGuard::new(&p.root);
    let up = p.cmd("swarm").args(["up", "--no-tmux", "--detach"]).run();
    assert_eq!(up.code, 0, "{}\n{}", up.stdout, up.stderr);
    wait_until(WAIT, "coder idle", || coder_state(&p) == "idle");
    let (code, v) = doctor(&p, &[]);
    assert_eq!((code, codes(&v)), (0, vec![]), "{v:#}");
}

/// A tmux swarm whose server is gone is stale (the pointer names the
/// socket the swarm made); a pointer naming nothing, or another socket, or
/// holding control characters is not believed and says so, without
/// connecting anywhere.
#[test]
fn a_stale_socket_and_a_pointer_that_cannot_be_believed_are_told_apart() {
    if !require_tool("tmux", "apt-get install -y tmux") || require_bwrap().is_none() {
        return;
    }
    let p = Project::empty();
    p.write("swarm.yaml", &yaml(&p, ""));
    let mut guard = SwarmGuard::new(&p.root);
    p.cmd("swarm").args(["up", "--detach"]).run().ok();
    let sock = p.read(".swarmforge/tmux-socket").trim().to_string();
    guard.socket = Some(PathBuf::from(&sock));
    // The server dies without `swarm down`.
    p.cmd("tmux").args(["-S", &sock, "kill-server"]).run().ok();
    let (code, v) = doctor(&p, &[]);
    assert_eq!(code, 1);
    let stale = doctor_findings(&v, "TMUX_SOCKET_STALE");
    assert_eq!(stale.len(), 1, "{v:#}");
    assert!(
        stale[0]["message"].as_str().unwrap().contains(&sock),
        "{v:#}"
    );
    assert!(stale[0]["fix"].as_str().unwrap().contains("swarm down"));

    for planted in [
        String::new(),
        "\n".to_string(),
        "/tmp/elsewhere/other.sock\n".to_string(),
        format!("{sock}\u{1b}[2J\n"),
    ] {
        p.write(".swarmforge/tmux-socket", &planted);
        let (_, v) = doctor(&p, &[]);
        let c = codes(&v);
        assert!(
            c.contains(&"TMUX_SOCKET_POINTER".to_string())
                && !c.contains(&"TMUX_SOCKET_STALE".to_string()),
            "{planted:?}: {v:#}"
        );
        let m = doctor_findings(&v, "TMUX_SOCKET_POINTER")[0]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            m.contains(".swarmforge/tmux-socket cannot be believed"),
            "{m}"
        );
        assert!(!m.contains('\u{1b}'), "{m}");
    }
    p.swarm(&["down"]).ok();
    let (_, v) = doctor(&p, &[]);
    assert!(!codes(&v).iter().any(|c| c.starts_with("TMUX_")), "{v:#}");
}

/// `mode: bacth`: one CONFIG_INVALID naming file:line:col, and every check
/// that needs no config still runs (the daemon's, the sandbox's). A line
/// of roles.tsv that is skipped is one too. Repaired, both are gone.
#[test]
fn a_broken_swarm_yaml_is_one_finding_and_the_other_checks_still_run() {
    let p = Project::empty();
    p.write("swarm.yaml", &yaml(&p, ""));
    p.swarm(&["init"]).ok();
    let good = p.read("swarm.yaml");
    let line = good
        .lines()
        .position(|l| l.contains("mode: batch"))
        .unwrap()
        + 1;
    p.write("swarm.yaml", &good.replace("mode: batch", "mode: bacth"));
    let no_bwrap = p.path("no-such-bwrap");
    let no_bwrap = no_bwrap.to_str().unwrap();
    let (code, v) = doctor(&p, &[("SWARM_BWRAP", no_bwrap)]);
    assert_eq!(code, 1, "{v:#}");
    let invalid = doctor_findings(&v, "CONFIG_INVALID");
    assert_eq!(invalid.len(), 1, "{v:#}");
    let m = invalid[0]["message"].as_str().unwrap();
    let at = format!(
        "{}:{line}:11: unknown variant `bacth`",
        p.path("swarm.yaml").display()
    );
    assert!(m.starts_with(&at), "{m}\nwanted {at}");
    assert!(!m.contains('\n'));
    assert_eq!(invalid[0]["path"], p.path("swarm.yaml").to_str().unwrap());
    let c = codes(&v);
    for want in ["DAEMON_NOT_RUNNING", "CONFINEMENT"] {
        assert!(c.contains(&want.to_string()), "{want} missing: {v:#}");
    }
    assert!(!c.contains(&"AUDIT_UNREADABLE".to_string()), "{v:#}");
    assert!(checks(&v).len() >= 20, "{v:#}");
    let text = p.cmd("swarm").args(["doctor"]).run();
    assert_eq!(text.code, 1);
    text.stdout_has("FINDING  CONFIG_INVALID: ")
        .stdout_has("ok       disk_space\n");

    // A roles.tsv line that is skipped: one finding, at its line.
    p.write("swarm.yaml", &good);
    let tsv = p.read(".swarmforge/roles.tsv");
    p.write(".swarmforge/roles.tsv", &format!("{tsv}broken\tline\n"));
    let n = tsv.lines().count() + 1;
    let (_, v) = doctor(&p, &[]);
    let invalid = doctor_findings(&v, "CONFIG_INVALID");
    assert_eq!(invalid.len(), 1, "{v:#}");
    let m = invalid[0]["message"].as_str().unwrap();
    assert!(
        m.starts_with(&format!(
            "{}:{n}: fewer than 3",
            p.path(".swarmforge/roles.tsv").display()
        )),
        "{m}"
    );
    // Not a file at all: one finding, and no unreadable trail besides.
    fs::remove_file(p.path(".swarmforge/roles.tsv")).unwrap();
    std::os::unix::fs::symlink(p.path("swarm.yaml"), p.path(".swarmforge/roles.tsv")).unwrap();
    let (_, v) = doctor(&p, &[]);
    let invalid = doctor_findings(&v, "CONFIG_INVALID");
    assert_eq!(invalid.len(), 1, "{v:#}");
    assert_eq!(
        invalid[0]["path"],
        p.path(".swarmforge/roles.tsv").to_str().unwrap()
    );
    assert!(
        !codes(&v).contains(&"AUDIT_UNREADABLE".to_string()),
        "{v:#}"
    );
    fs::remove_file(p.path(".swarmforge/roles.tsv")).unwrap();
    fs::write(p.path(".swarmforge/roles.tsv"), &tsv).unwrap();
    // Repaired (`swarm init` writes the table again): nothing.
    p.swarm(&["init"]).ok();
    let (_, v) = doctor(&p, &[]);
    assert!(doctor_findings(&v, "CONFIG_INVALID").is_empty(), "{v:#}");
}

/// Before `swarm init`: NOT_INITIALISED, and the agent CLIs, the sandbox,
/// tmux and the disk are still checked; nothing is written.
#[test]
fn before_init_doctor_says_so_and_still_checks_the_rest() {
    let p = Project::empty();
    let tools = tempfile::tempdir().unwrap();
    let bare = path_with(&tools.path().join("bare"), &["git"]);
    let no_bwrap = tools.path().join("no-such-bwrap");
    let no_bwrap = no_bwrap.to_str().unwrap();
    let (code, v) = doctor(&p, &[("PATH", &bare), ("SWARM_BWRAP", no_bwrap)]);
    assert_eq!(code, 1, "{v:#}");
    let c = codes(&v);
    for want in [
        "NOT_INITIALISED",
        "AGENT_CLI_MISSING",
        "CONFINEMENT",
        "TMUX_MISSING",
    ] {
        assert!(c.contains(&want.to_string()), "{want} missing: {v:#}");
    }
    // Nothing that needs a project is reported as missing.
    for not in ["DAEMON_NOT_RUNNING", "COMMIT_MSG_HOOK", "AUDIT_UNREADABLE"] {
        assert!(!c.contains(&not.to_string()), "{not}: {v:#}");
    }
    let f = &doctor_findings(&v, "NOT_INITIALISED")[0];
    assert!(f["message"]
        .as_str()
        .unwrap()
        .contains(&p.root.display().to_string()));
    assert!(f["fix"].as_str().unwrap().contains("swarm init"));
    assert_eq!(v["root"], p.root.to_str().unwrap());
    assert!(crate::support::entries(&p.root).is_empty(), "doctor wrote");

    // An agent CLI, tmux and a sandbox there: only NOT_INITIALISED left.
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let Some(bwrap) = require_bwrap() else {
        return;
    };
    let full = path_with(&tools.path().join("full"), &["git", "tmux", "sh", "true"]);
    script(&tools.path().join("full/claude"), "#!/bin/sh\nexit 0\n");
    let bwrap = on_path(&bwrap).display().to_string();
    let env = [("PATH", full.as_str()), ("SWARM_BWRAP", bwrap.as_str())];
    let (_, v) = doctor(&p, &env);
    assert_eq!(codes(&v), vec!["NOT_INITIALISED".to_string()], "{v:#}");
    // Named outside any project, the same.
    let r = p
        .cmd("swarm")
        .at(tools.path())
        .args(["doctor", "--json"])
        .arg(&p.root)
        .env("PATH", &full)
        .env("SWARM_BWRAP", &bwrap)
        .run();
    assert_eq!(codes(&r.json()), vec!["NOT_INITIALISED".to_string()]);
}

/// A bwrap that cannot enter the coder's worktree (as Debian's says when a
/// bind hides it): doctor builds each agent's sandbox as `swarm up` does,
/// tries it, and names the role and bwrap's words; the person's role and
/// the other agent pass. The trial writes nothing into the person's home.
#[test]
fn doctor_names_the_role_whose_sandbox_would_not_start() {
    let p = Project::empty();
    let yaml = yaml(&p, "").replace(
        "roles:\n",
        "roles:\n  - name: reviewer\n    agent: sh \"$SWARMFORGE_PROJECT/agents/coder.sh\"\n    worktree: rev\n",
    );
    p.write("swarm.yaml", &yaml);
    p.swarm(&["init"]).ok();
    let tools = tempfile::tempdir().unwrap();
    let log = tools.path().join("calls");
    let stub = script(
        &tools.path().join("bwrap"),
        &format!(
            "#!/bin/sh\necho \"$*\" >> {log}\nprev=\nfor a in \"$@\"; do\n  if [ \"$prev\" = --chdir ]; then\n    case \"$a\" in */coder) echo \"bwrap: Can't chdir to $a: No such file or directory\" >&2; exit 1 ;; esac\n  fi\n  prev=$a\ndone\nexit 0\n",
            log = log.display()
        ),
    );
    let home = tools.path().join("home");
    fs::create_dir_all(&home).unwrap();
    let stub = stub.to_str().unwrap();
    let (code, v) = doctor(
        &p,
        &[("SWARM_BWRAP", stub), ("HOME", home.to_str().unwrap())],
    );
    assert_eq!(code, 1, "{v:#}");
    let found = doctor_findings(&v, "CONFINEMENT_ROLE");
    assert_eq!(found.len(), 1, "{v:#}");
    let m = found[0]["message"].as_str().unwrap();
    assert!(m.starts_with("role coder: "), "{m}");
    assert!(
        m.contains(&format!(
            "bwrap: Can't chdir to {}",
            p.path(".worktrees/coder").display()
        )),
        "{m}"
    );
    assert!(found[0]["fix"].as_str().unwrap().contains("confine: false"));
    assert!(!codes(&v).contains(&"CONFINEMENT".to_string()), "{v:#}");
    // The probe and one trial per agent (reviewer, coder), with the
    // sandbox `swarm up` builds: its worktree writable, the cockpit's
    // token hidden.
    let calls = fs::read_to_string(&log).unwrap();
    assert_eq!(calls.lines().count(), 3, "{calls}");
    let rev = p.path(".worktrees/rev").display().to_string();
    assert!(
        calls.contains(&format!("--bind {rev} {rev}")) && calls.contains("-- sh -c true"),
        "{calls}"
    );
    assert!(
        crate::support::entries(&home).is_empty(),
        "the trial wrote into HOME: {:?}",
        crate::support::entries(&home)
    );

    // Not confined: no sandbox to try.
    p.write(
        "swarm.yaml",
        &yaml.replace("launch:\n", "launch:\n  confine: false\n"),
    );
    let (_, v) = doctor(&p, &[("SWARM_BWRAP", stub)]);
    assert!(
        !codes(&v).iter().any(|c| c.starts_with("CONFINEMENT")),
        "{v:#}"
    );
}
