//! Confinement where users live (issue 42) and what a confined agent can
//! plant for the next start (issue 43): the project inside the home folder
//! at any depth, the home inside the project, a symlinked home; a link in
//! place of the agent's private home, its queue folders or its git folder's
//! pointers; the policy files of an agent at the root; the person's
//! session sockets and the A2A token.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{Project, Run, SwarmGuard};

/// Sends a note to `b` once, then drains its queue; records what its home
/// and the project looked like from inside.
const SENDER: &str = r#"set -u
r="$SWARMFORGE_PROJECT/.worktrees/a/seen.txt"
echo mine >"$HOME/mine.txt" && echo "home: writable" >>"$r"
test -r "$SWARMFORGE_PROJECT/swarm.yaml" && echo "project: readable" >>"$r"
if [ ! -e sent ]; then
  printf 'type: note\nto: b\npriority: 50\nmessage: from the home layout\n' >d.txt && swarm-handoff d.txt >/dev/null && touch sent && echo "sent" >>"$r"
fi
out=$(ready-next)
until printf '%s\n' "$out" | grep -qx NO_TASK; do out=$(done-current); done
"#;

const DRAIN: &str = "out=$(ready-next)\nuntil printf '%s\\n' \"$out\" | grep -qx NO_TASK; do out=$(done-current); done\n";

/// `swarm up --no-tmux --until-idle --timeout <secs>s` at `root` with
/// `env`, its output once it stops (the test's deadline ten seconds later).
fn up_until_idle(g: &Project, root: &Path, env: &[(&str, &Path)], secs: u64) -> Run {
    let mut guard = SwarmGuard::new(root);
    let mut up = g.cmd("swarm").at(root).bins_on_path();
    for (k, v) in env {
        up = up.env(*k, *v);
    }
    let timeout = format!("{secs}s");
    guard.guard(
        up.args(["up", "--no-tmux", "--until-idle", "--timeout", &timeout])
            .start(),
    );
    guard.finish(Duration::from_secs(secs + 10), "the swarm stops")
}

/// A two-agent swarm at `root` (made), run headless to idle with `home` as
/// HOME: the note reaches `b` and is completed.
fn run_in(g: &Project, root: &Path, home: &Path) {
    fs::create_dir_all(root.join("agents")).unwrap();
    fs::write(root.join("agents/a.sh"), SENDER).unwrap();
    fs::write(root.join("agents/b.sh"), DRAIN).unwrap();
    fs::write(
        root.join("swarm.yaml"),
        "launch: {stagger: 0ms}\nroles:\n  - {name: a, worktree: a, agent: sh \"$SWARMFORGE_PROJECT/agents/a.sh\"}\n  - {name: b, worktree: b, agent: sh \"$SWARMFORGE_PROJECT/agents/b.sh\"}\n  - {name: boss, worktree: boss, agent: human}\n",
    )
    .unwrap();
    g.cmd("swarm")
        .at(root)
        .env("HOME", home)
        .args(["init", "--quiet"])
        .run()
        .ok();
    let out = up_until_idle(g, root, &[("HOME", home)], 60);
    let log = |r: &str| fs::read_to_string(root.join(format!(".swarmforge/agents/{r}.log")));
    assert_eq!(
        out.code,
        0,
        "stdout:\n{}\nstderr:\n{}\na.log:\n{:?}",
        out.stdout,
        out.stderr,
        log("a")
    );
    let seen = fs::read_to_string(root.join(".worktrees/a/seen.txt")).unwrap_or_default();
    for line in ["home: writable", "project: readable", "sent"] {
        assert!(seen.contains(line), "{line}:\n{seen}\n{:?}", log("a"));
    }
    let t = g.cmd("swarm").at(root).args(["transcript"]).run();
    assert!(t.stdout.contains("from the home layout"), "{}", t.stdout);
    let b = root.join(".worktrees/b/.swarmforge/handoffs/inbox/completed");
    assert_eq!(fs::read_dir(&b).map(|d| d.count()).unwrap_or(0), 1, "{b:?}");
    // The private home took the write, not the person's.
    assert!(!home.join("mine.txt").exists());
    assert!(root.join(".swarmforge/agents/a/home/mine.txt").is_file());
}

fn private(dir: &Path, mode: u32) {
    fs::create_dir_all(dir).unwrap();
    fs::set_permissions(dir, fs::Permissions::from_mode(mode)).unwrap();
}

/// `~/code/proj`, the way people keep projects, with a home folder of mode
/// 700: the sandbox's private home is mounted first, the project on it.
#[test]
fn a_confined_swarm_runs_in_a_project_inside_the_home_folder() {
    if crate::support::require_bwrap().is_none() {
        return;
    }
    let g = Project::empty_at_home();
    let home = g.path("home/person");
    private(&home, 0o700);
    run_in(&g, &home.join("code/work/proj"), &home);
}

/// The home folder inside the project, and a project whose home is reached
/// through a link (`/home -> /usr/home` on some systems).
#[test]
fn a_confined_swarm_runs_with_the_home_inside_the_project_or_behind_a_link() {
    if crate::support::require_bwrap().is_none() {
        return;
    }
    let g = Project::empty_at_home();
    let root = g.path("proj");
    let home = root.join("person-home");
    private(&home, 0o750);
    run_in(&g, &root, &home);

    let real = g.path("real-home");
    private(&real, 0o750);
    let link = g.path("home-link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    run_in(&g, &link.join("code/proj"), &link);
}

/// The hostile agent's tries for the next start: each line of
/// `results.txt` is `<what>: refused` or `<what>: DONE`.
const PLANTER: &str = r#"set -u
P="$SWARMFORGE_PROJECT"
r="$P/.worktrees/hostile/results.txt"
try() { what=$1; shift; if ( "$@" ) >/dev/null 2>&1; then echo "$what: DONE" >>"$r"; else echo "$what: refused" >>"$r"; fi; }
# Whatever start this is: can it reach what the person keeps?
try pwn sh -c "echo x >'$P/.swarmforge/PWNED'"
try git_pointer sh -c "echo 'gitdir: $P/.git/worktrees/victim' >.git"
try git_commondir sh -c "echo /tmp >\"\$(git rev-parse --absolute-git-dir)/commondir\""
try git_backlink sh -c "echo /tmp/x/.git >\"\$(git rev-parse --absolute-git-dir)/gitdir\""
try a2a_token cat "$P/.swarmforge/a2a/token"
try creds grep -q SECRET "$P/nats.creds"
try runtime_bus test -e "$(cat "$P/agents/runtime")/bus"
try ssh_agent sh -c 'test -n "${SSH_AUTH_SOCK:-}"'
try policy sh -c "echo '# mine' >>'$P/swarm.yaml'"
try run_socket python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect(open('$P/agents/run-socket').read())"
try abstract python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect('\0' + open('$P/agents/abstract').read())"
# For the next start: its private home, as a link to the project.
own="$P/.swarmforge/agents/hostile"
if [ ! -L "$own/home" ]; then
  mv "$own/home" "$own/home.old" && ln -s "$P" "$own/home" && echo "planted: home" >>"$r"
fi
"#;

/// What a confined agent plants in the folders it may write is never
/// followed by the next start, nor by `swarm up`; what it can read of the
/// person's side is nothing (issue 43, points 1 to 6).
#[test]
fn a_confined_agent_cannot_plant_a_way_out_for_its_next_start() {
    if crate::support::require_bwrap().is_none() {
        return;
    }
    let g = Project::empty_at_home();
    let root = g.path("proj");
    let home = g.path("home");
    private(&home, 0o700);
    let runtime = g.path("run-user");
    private(&runtime, 0o700);
    fs::write(runtime.join("bus"), "").unwrap();
    fs::create_dir_all(root.join("agents")).unwrap();
    fs::write(root.join("agents/runtime"), runtime.to_str().unwrap()).unwrap();
    // An abstract socket of the person's session (a bus, X11, an IDE's):
    // no mount namespace hides it; Landlock's scope does.
    let name = format!("swarm-confine-test-{}", std::process::id());
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            &name,
        )
        .unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    fs::write(root.join("agents/abstract"), &name).unwrap();
    // A socket of the system's (Docker's is /run/docker.sock): a read-only
    // mount does not stop a connect(); an empty /run does. Only root may
    // make one there, as CI does.
    let run_socket = RunSocket::bind(&format!("swarm-confine-test-{}.sock", std::process::id()));
    fs::write(
        root.join("agents/run-socket"),
        run_socket.path.to_str().unwrap(),
    )
    .unwrap();
    fs::create_dir_all(root.join("agents")).unwrap();
    fs::write(root.join("agents/hostile.sh"), PLANTER).unwrap();
    fs::write(root.join("agents/victim.sh"), DRAIN).unwrap();
    fs::write(root.join("nats.creds"), "creds-SECRET\n").unwrap();
    fs::write(
        root.join("swarm.yaml"),
        "launch: {stagger: 0ms}\nbridge_credentials_file: nats.creds\nroles:\n  - {name: hostile, worktree: hostile, agent: sh \"$SWARMFORGE_PROJECT/agents/hostile.sh\"}\n  - {name: victim, worktree: victim, agent: sh \"$SWARMFORGE_PROJECT/agents/victim.sh\"}\n  - {name: boss, worktree: boss, agent: human}\n",
    )
    .unwrap();
    g.cmd("swarm")
        .at(&root)
        .args(["init", "--quiet"])
        .run()
        .ok();
    let a2a = root.join(".swarmforge/a2a");
    fs::create_dir_all(&a2a).unwrap();
    fs::write(a2a.join("token"), "a2a-SECRET\n").unwrap();
    // Work that waits for it, so the supervisor starts it again.
    fs::write(
        root.join(".worktrees/boss/note.txt"),
        "type: note\nto: hostile\npriority: 50\nmessage: go on\n",
    )
    .unwrap();
    let bus = runtime.join("bus");
    let env = [
        ("HOME", home.as_path()),
        ("XDG_RUNTIME_DIR", runtime.as_path()),
        ("SSH_AUTH_SOCK", bus.as_path()),
    ];
    let up = |secs: u64| up_until_idle(&g, &root, &env, secs);
    g.cmd("swarm-handoff")
        .at(root.join(".worktrees/boss"))
        .env("SWARMFORGE_ROLE", "boss")
        .arg("note.txt")
        .run()
        .ok();
    let first = up(20);
    let results = fs::read_to_string(root.join(".worktrees/hostile/results.txt"))
        .unwrap_or_else(|e| panic!("{e}\n{}\n{}", first.stdout, first.stderr));
    assert!(results.contains("planted: home"), "{results}");
    for attempt in [
        "pwn",
        "git_pointer",
        "git_commondir",
        "git_backlink",
        "a2a_token",
        "creds",
        "runtime_bus",
        "ssh_agent",
        "policy",
        "abstract",
        "run_socket",
    ] {
        assert!(
            results.contains(&format!("{attempt}: refused")),
            "{attempt} was not refused:\n{results}"
        );
        assert!(
            !results.contains(&format!("{attempt}: DONE")),
            "{attempt} got through on a later start:\n{results}"
        );
    }
    assert!(!root.join(".swarmforge/PWNED").exists());
    // The start after the plant refused to build the sandbox, and said why.
    let log = fs::read_to_string(root.join(".swarmforge/agents/hostile.log")).unwrap_or_default();
    let planted = root.join(".swarmforge/agents/hostile/home");
    let why = format!("{}: a link", planted.display());
    assert!(log.contains(&why), "{log}");
    // So does the next `swarm up`, before anything starts.
    let second = up(5);
    assert_ne!(second.code, 0, "{}\n{}", second.stdout, second.stderr);
    assert!(second.stderr.contains(&why), "{}", second.stderr);
    assert!(!root.join(".swarmforge/PWNED").exists());
    // The person's files are as they were.
    assert_eq!(
        fs::read_to_string(root.join(".worktrees/hostile/.git")).unwrap(),
        fs::read_to_string(root.join(".worktrees/victim/.git"))
            .unwrap()
            .replace("victim", "hostile")
    );
    assert!(!fs::read_to_string(root.join("swarm.yaml"))
        .unwrap()
        .contains("# mine"));
}

/// A listening Unix socket in `/run` while it lives (none when this user
/// may not make one there, which only CI's root can count on).
struct RunSocket {
    path: PathBuf,
    listener: Option<std::os::unix::net::UnixListener>,
}

impl RunSocket {
    fn bind(name: &str) -> RunSocket {
        let path = Path::new("/run").join(name);
        let listener = std::os::unix::net::UnixListener::bind(&path).ok();
        if listener.is_none() && crate::support::is_root() {
            panic!("root cannot make a socket in /run: {}", path.display());
        }
        RunSocket { path, listener }
    }
}

impl Drop for RunSocket {
    fn drop(&mut self) {
        if self.listener.take().is_some() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// An agent at the project root (`worktree: master`, the default) cannot
/// rewrite the policy that confines it: swarm.yaml is read-only inside.
#[test]
fn an_agent_at_the_root_cannot_rewrite_the_swarms_policy() {
    if crate::support::require_bwrap().is_none() {
        return;
    }
    let g = Project::empty_at_home();
    let root = g.path("proj");
    fs::create_dir_all(root.join("agents")).unwrap();
    fs::write(
        root.join("agents/root.sh"),
        "if echo 'launch: {confine: false}' >>swarm.yaml 2>/dev/null; then echo DONE >tried.txt; else echo refused >tried.txt; fi\n",
    )
    .unwrap();
    fs::write(
        root.join("swarm.yaml"),
        "launch: {stagger: 0ms}\nroles:\n  - {name: lead, worktree: master, agent: sh \"$SWARMFORGE_PROJECT/agents/root.sh\"}\n",
    )
    .unwrap();
    g.cmd("swarm")
        .at(&root)
        .args(["init", "--quiet"])
        .run()
        .ok();
    let before = fs::read_to_string(root.join("swarm.yaml")).unwrap();
    let out = up_until_idle(&g, &root, &[], 30);
    let tried: PathBuf = root.join("tried.txt");
    assert_eq!(
        fs::read_to_string(&tried).unwrap_or_default().trim(),
        "refused",
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(fs::read_to_string(root.join("swarm.yaml")).unwrap(), before);
}

/// What the agent at the root plants in `.git`: a `commondir` that sends
/// the person's git to a config of its own (with an fsmonitor), and a
/// rewrite of another worktree's git folder.
const ROOT_PLANTER: &str = r#"P="$SWARMFORGE_PROJECT"
mkdir -p "$P/evil-common"
printf '[core]\n\tfsmonitor = "touch %s/PWNED; false"\n' "$P" >"$P/evil-common/config"
if echo "$P/evil-common" >"$P/.git/commondir"; then echo planted >>tried.txt; fi
for w in "$P"/.git/worktrees/*/; do
  if echo "$P/evil-common" >"$w/commondir" 2>/dev/null; then echo "worktree: DONE" >>tried.txt; else echo "worktree: refused" >>tried.txt; fi
done
i=0
while [ -e "$P/.git/commondir" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
[ -e "$P/.git/commondir" ] || echo "moved aside" >>tried.txt
"#;

/// A swarm in `~/proj` (mode-700 home) whose `lead` works in the project
/// root running `script`, and `b`, in a worktree, draining its queue; run
/// until idle (`secs` at most). The run, what the agent at the root wrote
/// to `tried.txt`, and both with the run's output (for a failed assertion).
fn root_swarm_run(script: &str, secs: u64) -> (Project, PathBuf, Run, String, String) {
    let g = Project::empty_at_home();
    let root = g.path("proj");
    fs::create_dir_all(root.join("agents")).unwrap();
    fs::write(root.join("agents/root.sh"), script).unwrap();
    fs::write(root.join("agents/b.sh"), DRAIN).unwrap();
    fs::write(
        root.join("swarm.yaml"),
        "launch: {stagger: 0ms}\nroles:\n  - {name: lead, worktree: master, agent: sh \"$SWARMFORGE_PROJECT/agents/root.sh\"}\n  - {name: b, worktree: b, agent: sh \"$SWARMFORGE_PROJECT/agents/b.sh\"}\n",
    )
    .unwrap();
    g.cmd("swarm")
        .at(&root)
        .args(["init", "--quiet"])
        .run()
        .ok();
    let out = up_until_idle(&g, &root, &[], secs);
    let tried = fs::read_to_string(root.join("tried.txt")).unwrap_or_default();
    let said = format!("{tried}\n{}\n{}", out.stdout, out.stderr);
    (g, root, out, tried, said)
}

/// An agent at the project root can write `.git` (its index, HEAD and
/// branches live there), so it can make a `commondir` there, which the
/// person's own git in the project would follow to a config that runs a
/// program. handoffd moves it aside at once and doctor reports it; while
/// one is in place (handoffd down), no agent's sandbox is made, and doctor
/// says why. Other worktrees' git folders are read-only to it.
#[test]
fn a_commondir_planted_by_the_agent_at_the_root_is_moved_aside_and_reported() {
    if crate::support::require_bwrap().is_none() {
        return;
    }
    let (g, root, _, tried, said) = root_swarm_run(ROOT_PLANTER, 40);
    assert!(tried.contains("planted"), "{said}");
    assert!(tried.contains("worktree: refused"), "{said}");
    assert!(!tried.contains("worktree: DONE"), "{said}");
    assert!(tried.contains("moved aside"), "{said}");
    assert!(!root.join(".git/commondir").exists());
    // The person's git in the project runs nothing of the agent's.
    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .arg("status")
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    assert!(
        !root.join("PWNED").exists(),
        "the person's git ran the agent's fsmonitor"
    );
    let moved: Vec<_> = fs::read_dir(root.join(".swarmforge/planted"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    let doctor = g.cmd("swarm").at(&root).args(["doctor", "--json"]).run();
    assert!(
        doctor.stdout.contains("GIT_POINTER_PLANTED"),
        "{}",
        doctor.stdout
    );
    assert!(doctor.stdout.contains("evil-common"), "{}", doctor.stdout);
    // With handoffd down, one in place stops every agent's start, and
    // doctor says so; gone (looked at), doctor is quiet again.
    fs::remove_dir_all(root.join(".swarmforge/planted")).unwrap();
    let planted = root.join(".git/commondir");
    fs::write(&planted, root.join("evil-common").to_str().unwrap()).unwrap();
    let doctor = g.cmd("swarm").at(&root).args(["doctor", "--json"]).run();
    let report = doctor.json();
    let text = report.to_string();
    assert!(text.contains("GIT_POINTER_PLANTED"), "{text}");
    assert!(text.contains("CONFINEMENT_ROLE"), "{text}");
    assert!(text.contains(&planted.display().to_string()), "{text}");
    fs::remove_file(&planted).unwrap();
    let doctor = g.cmd("swarm").at(&root).args(["doctor", "--json"]).run();
    assert!(
        !doctor.stdout.contains("GIT_POINTER_PLANTED"),
        "{}",
        doctor.stdout
    );
}

/// The agent at the root commits, waits until handoffd took its objects
/// in, then rewrites its reviewed blob: in the store (read-only inside),
/// and under the same name in its own `.git/objects` (its quarantine); and
/// puts an object under a name that is not its content's.
const ROOT_OBJECTS: &str = r#"t="$PWD/tried.txt"
echo reviewed >r.txt && git add r.txt && git -c user.name=l -c user.email=l@invalid commit -qm r && echo committed >>"$t"
o=$(git rev-parse --git-path objects)
w=$(git rev-parse HEAD:r.txt); wd=$(echo "$w" | cut -c1-2); wf=$(echo "$w" | cut -c3-)
gone() { i=0; while [ -e "$1" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; [ ! -e "$1" ]; }
gone "$o/$wd/$wf" && echo "taken in" >>"$t"
git init -q /tmp/s && e=$(printf 'evil\n' | git -C /tmp/s hash-object -w --stdin)
evil=/tmp/s/.git/objects/$(echo "$e" | cut -c1-2)/$(echo "$e" | cut -c3-)
if cp "$evil" "/run/swarm-handoff/objects/$wd/$wf" 2>/dev/null; then echo "store: DONE" >>"$t"; else echo "store: refused" >>"$t"; fi
mkdir -p "$o/$wd" && cp "$evil" "$o/$wd/$wf"
h=$(printf 'reviewed too\n' | git hash-object --stdin) && echo "$h" >forged-id.txt
hd=$(echo "$h" | cut -c1-2)
mkdir -p "$o/$hd" && cp "$evil" "$o/$hd/$(echo "$h" | cut -c3-)"
gone "$o/$wd/$wf" && gone "$o/$hd/$(echo "$h" | cut -c3-)" && echo "forged gone" >>"$t"
"#;

/// Issue 43, way 12: git objects an agent writes reach the project's store
/// only through handoffd, hashed; the store is read-only inside, so a
/// reviewed commit's blob cannot be rewritten under its id. The agent at
/// the root (whose `.git` is otherwise its own to write) tries it all;
/// doctor reports the refused object, and objects left waiting with no
/// handoffd to take them in, and neither on a healthy swarm.
#[test]
fn an_object_rewritten_by_the_agent_at_the_root_never_reaches_the_store() {
    if crate::support::require_bwrap().is_none() {
        return;
    }
    let (g, root, out, tried, said) = root_swarm_run(ROOT_OBJECTS, 60);
    for step in ["committed", "taken in", "store: refused", "forged gone"] {
        assert!(tried.contains(step), "{step}:\n{said}");
    }
    // The refused object waits for a person: `--until-idle` says so and
    // exits 3, and status lists it with what to do.
    assert_eq!(out.code, 3, "{said}");
    assert!(out.stderr.contains("object_refused"), "{said}");
    let blob = crate::support::git(&root, &["cat-file", "-p", "master:r.txt"]);
    assert_eq!(blob, "reviewed", "{said}");
    let forged = fs::read_to_string(root.join("forged-id.txt")).unwrap();
    let forged = forged.trim().to_string();
    assert!(!crate::support::git_ok(&root, &["cat-file", "-e", &forged]));
    crate::support::doctor_reports_refused_object(&g, &root, &forged);
    let attention = |g: &Project| {
        g.cmd("swarm")
            .at(&root)
            .args(["status", "--json"])
            .run()
            .json()["attention"]
            .to_string()
    };
    let listed = attention(&g);
    assert!(
        listed.contains("object_refused") && listed.contains(&forged),
        "{listed}"
    );
    // Objects an agent left while no handoffd ran, a while ago: not in the
    // person's repository, and doctor says so.
    let q = root.join(".swarmforge/objects/quarantine/lead/ab");
    fs::create_dir_all(&q).unwrap();
    let left = fs::File::create(q.join("c".repeat(38))).unwrap();
    left.set_modified(std::time::SystemTime::now() - Duration::from_secs(600))
        .unwrap();
    let doctor = g.cmd("swarm").at(&root).args(["doctor", "--json"]).run();
    assert!(
        doctor.stdout.contains("GIT_OBJECTS_WAITING"),
        "{}",
        doctor.stdout
    );
    fs::remove_dir_all(&q).unwrap();
    fs::remove_dir_all(root.join(".swarmforge/objects/refused")).unwrap();
    let doctor = g.cmd("swarm").at(&root).args(["doctor", "--json"]).run();
    assert!(!doctor.stdout.contains("GIT_OBJECT"), "{}", doctor.stdout);
    assert!(!attention(&g).contains("object_refused"));
}

/// An agent that rewrote its worktree's `.git` file (an unconfined one, or
/// one from before the pointers were read-only) to a git folder of its own
/// whose config sets `core.fsmonitor` to a script: the person's `swarm
/// doctor`, which asks git about that worktree, runs git pinned to the
/// project's own folders, so the script never runs (issue 43, point 2).
#[test]
fn the_persons_git_never_runs_what_an_agents_checkout_points_at() {
    let g = Project::empty_at_home();
    let root = g.path("proj");
    fs::create_dir_all(&root).unwrap();
    fs::write(
        root.join("swarm.yaml"),
        "launch: {confine: false}\nroles:\n  - {name: a, worktree: a, agent: sh -c true}\n  - {name: boss, worktree: boss, agent: human}\n",
    )
    .unwrap();
    g.cmd("swarm")
        .at(&root)
        .args(["init", "--quiet"])
        .run()
        .ok();
    // What the agent builds: a copy of its git folder whose commondir is a
    // repository of its own with an fsmonitor script.
    let evil = g.path("evil");
    let pwned = g.path("PWNED");
    crate::support::git(
        &root,
        &[
            "init",
            "-q",
            "--bare",
            evil.join("common").to_str().unwrap(),
        ],
    );
    let script = evil.join("fsmonitor.sh");
    fs::write(&script, format!("#!/bin/sh\ntouch '{}'\n", pwned.display())).unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    crate::support::git(
        &root,
        &[
            "--git-dir",
            evil.join("common").to_str().unwrap(),
            "config",
            "core.fsmonitor",
            script.to_str().unwrap(),
        ],
    );
    let theirs = evil.join("a");
    fs::create_dir_all(&theirs).unwrap();
    for f in ["HEAD", "index"] {
        let from = root.join(".git/worktrees/a").join(f);
        if from.exists() {
            fs::copy(&from, theirs.join(f)).unwrap();
        }
    }
    let wt = root.join(".worktrees/a");
    fs::write(
        theirs.join("commondir"),
        evil.join("common").to_str().unwrap(),
    )
    .unwrap();
    fs::write(
        theirs.join("gitdir"),
        format!("{}\n", wt.join(".git").display()),
    )
    .unwrap();
    fs::write(wt.join(".git"), format!("gitdir: {}\n", theirs.display())).unwrap();
    // The person's own git would run it (what the pin prevents).
    let plain = std::process::Command::new("git")
        .arg("-C")
        .arg(&wt)
        .args(["ls-files", "--error-unmatch", "--", "x"])
        .output()
        .unwrap();
    assert!(pwned.exists(), "the attack works on plain git: {plain:?}");
    fs::remove_file(&pwned).unwrap();
    g.cmd("swarm").at(&root).args(["doctor"]).run();
    assert!(!pwned.exists(), "swarm doctor ran the agent's fsmonitor");
}

/// A confined agent is told in its primer what the sandbox allows, so it
/// does not try to "fix" a read-only file system (issue 42, point 8); an
/// unconfined one is not.
#[test]
fn the_primer_says_what_the_sandbox_allows() {
    let d = Project::empty();
    d.write(
        "swarm.yaml",
        "roles:\n  - {name: a, worktree: a, agent: sh -c true}\n  - {name: boss, worktree: boss, agent: human}\n",
    );
    let p = d.cmd("swarm").args(["prompt", "a"]).run();
    p.ok();
    assert!(p.stdout.contains("## Your sandbox"), "{}", p.stdout);
    assert!(p.stdout.contains("git checkout -b"), "{}", p.stdout);
    d.write(
        "swarm.yaml",
        "launch: {confine: false}\nroles:\n  - {name: a, worktree: a, agent: sh -c true}\n  - {name: boss, worktree: boss, agent: human}\n",
    );
    let p = d.cmd("swarm").args(["prompt", "a"]).run();
    p.ok();
    assert!(!p.stdout.contains("## Your sandbox"), "{}", p.stdout);
}
