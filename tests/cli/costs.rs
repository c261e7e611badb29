//! What one call costs, counted in system calls under strace (counts, never
//! times): a send's fsyncs, and what a reply to the item in process lists.

use std::fs;

use crate::support::{require_tool, Cmd, Project, Role, Run};

/// Each `name(...)` call strace logged (one per line with `-f -e trace=`).
fn calls<'a>(log: &'a str, name: &str) -> Vec<&'a str> {
    let needle = format!("{name}(");
    log.lines().filter(|l| l.contains(&needle)).collect()
}

fn traced(p: &Project, role: &str, trace: &str, draft: &str) -> String {
    let path = p.draft(role, draft);
    let (r, log) = strace(p, p.cmd("swarm-handoff").role(role).arg(path), trace);
    r.ok();
    log
}

/// `cmd` run under strace logging `trace`: the run and strace's log.
fn strace(p: &Project, cmd: Cmd<'_>, trace: &str) -> (Run, String) {
    let log = p.root.join("strace.log");
    let log_arg = log.display().to_string();
    let r = cmd
        .under(&["strace", "-f", "-qq", "-o", &log_arg, "-e", trace])
        .run();
    (r, fs::read_to_string(&log).unwrap())
}

/// How many times `log` shows `file` (a path's end, e.g. `/swarm.yaml`)
/// opened.
fn opened(log: &str, file: &str) -> usize {
    let quoted = format!("{file}\"");
    calls(log, "openat")
        .into_iter()
        .filter(|l| l.contains(&quoted))
        .count()
}

/// `log` shows swarm.yaml and roles.tsv opened once each.
fn read_once(log: &str) {
    for file in ["/swarm.yaml", "/roles.tsv"] {
        let n = opened(log, file);
        assert_eq!(n, 1, "{file} opened {n} times:\n{log}");
    }
}

/// `coder` in the project root and `qa` in its own worktree.
fn coder_and_qa() -> Project {
    Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .build()
}

/// `coder` sends `draft` to `qa`, which takes it: its id.
fn taken_by_qa(p: &Project, draft: &str) -> String {
    p.send_as("coder", draft).ok();
    p.deliver_once().ok();
    let taken = p.cmd("ready-next").role("qa").args(["--json"]).run().json();
    taken["id"].as_str().expect("an id").to_string()
}

/// A project with cards and the card `jump` delivered to its first lane.
fn with_a_card() -> Project {
    let p = crate::cards::project(crate::support::Layout::Init);
    p.swarm(&["card", "new", "change", "jump"]).ok();
    p.deliver_once().ok();
    p
}

#[test]
fn a_send_costs_two_fsyncs() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = Project::builder().role("coder").role("qa").build();
    // The first send makes the outbox folders; count a later one.
    p.send_as(
        "coder",
        "type: note\nto: qa\npriority: 10\nmessage: first\n",
    )
    .ok();
    let log = traced(
        &p,
        "coder",
        "trace=fsync,fdatasync",
        "type: note\nto: qa\npriority: 10\nmessage: m\n",
    );
    // The message file and the outbox folder; the sequence counter needs none
    // (see protocol/sequence.rs for why a rolled-back one reissues no id).
    let syncs = calls(&log, "fsync").len() + calls(&log, "fdatasync").len();
    assert_eq!(syncs, 2, "{log}");
}

#[test]
fn a_reply_to_the_item_in_process_lists_no_history() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = coder_and_qa();
    let id = taken_by_qa(&p, "type: note\nto: qa\npriority: 10\nmessage: m\n");
    let draft = format!("type: note\nto: coder\npriority: 10\nmessage: ok\nin_reply_to: {id}\n");
    let log = traced(&p, "qa", "trace=openat", &draft);
    let opened_completed = calls(&log, "openat")
        .into_iter()
        .filter(|l| l.contains("/inbox/completed"))
        .count();
    assert_eq!(opened_completed, 0, "completed/ grows with history:\n{log}");
}

/// A reply naming a message completed long ago finds it through the id
/// index of `completed/` (docs/protocol.md §1.2), for a task and for an item
/// of a completed batch: `completed/` and its batch folders are never listed.
#[test]
fn a_reply_to_an_old_completed_message_lists_no_history() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    for mode in ["task", "batch"] {
        let p = Project::builder()
            .role("coder")
            .role(Role::new("qa").worktree("qa").mode(mode))
            .build();
        for i in 0..3 {
            p.send_as(
                "coder",
                &format!("type: note\nto: qa\npriority: 10\nmessage: m{i}\n"),
            )
            .ok();
        }
        p.deliver_once().ok();
        // Everything taken and completed: the parent is history now.
        for _ in 0..4 {
            p.cmd("ready-next").role("qa").run();
            p.cmd("done-current").role("qa").run();
        }
        let first = crate::support::inbox_copies(&p.wt_path("qa"))
            .into_iter()
            .map(|c| crate::support::file_name(&c))
            .min()
            .expect("completed copies");
        // `10_<id>_to_qa.handoff`
        let id = first
            .strip_prefix("10_")
            .and_then(|n| n.strip_suffix("_to_qa.handoff"))
            .unwrap()
            .to_string();
        let draft =
            format!("type: note\nto: coder\npriority: 10\nmessage: late\nin_reply_to: {id}\n");
        let log = traced(&p, "qa", "trace=openat,getdents64", &draft);
        assert!(
            !log.contains("must name a message"),
            "{mode}: the reply was refused:\n{log}"
        );
        let listed: Vec<&str> = calls(&log, "openat")
            .into_iter()
            .filter(|l| l.contains("/inbox/completed") && l.contains("O_DIRECTORY"))
            .collect();
        assert!(
            listed.is_empty(),
            "{mode}: completed/ was listed:\n{listed:?}"
        );
        assert_eq!(
            fs::read_dir(p.wt_path("qa").join(".swarmforge/handoffs/outbox"))
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".handoff"))
                .count(),
            1,
            "{mode}: the reply was not queued"
        );
    }
}

/// `done-current` killed right where it links the completed copy into the
/// id index (the new step after the move): the copy is completed, the link
/// missing; a reply naming it still finds it (by listing), and writes the
/// link again, so the reply after that lists nothing.
#[test]
fn a_completion_killed_before_its_id_link_is_still_found_and_relinked() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = Project::builder()
        .role("coder")
        .role(Role::new("qa").worktree("qa"))
        .build();
    p.send_as("coder", "type: note\nto: qa\npriority: 10\nmessage: m\n")
        .ok();
    p.deliver_once().ok();
    let taken = p.cmd("ready-next").role("qa").args(["--json"]).run().json();
    let id = taken["id"].as_str().expect("an id").to_string();
    let r = p
        .cmd("done-current")
        .role("qa")
        .under(&[
            "strace",
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "inject=symlink,symlinkat:signal=KILL",
        ])
        .run();
    assert!(!r.stdout.contains("COMPLETED"), "{r:?}");
    let hq = p.wt_path("qa").join(".swarmforge/handoffs");
    let completed = crate::support::handoff_names(&hq.join("inbox/completed"));
    assert_eq!(completed.len(), 1, "the copy was not completed");
    assert!(fs::symlink_metadata(hq.join("inbox/completed-ids").join(&id)).is_err());
    let draft = format!("type: note\nto: coder\npriority: 10\nmessage: late\nin_reply_to: {id}\n");
    for (round, listing) in [("first", true), ("second", false)] {
        let log = traced(&p, "qa", "trace=openat", &draft);
        let listed = calls(&log, "openat")
            .into_iter()
            .any(|l| l.contains("/inbox/completed") && l.contains("O_DIRECTORY"));
        assert_eq!(listed, listing, "{round} reply:\n{log}");
    }
    assert_eq!(
        fs::read_link(hq.join("inbox/completed-ids").join(&id)).unwrap(),
        std::path::Path::new(&completed[0])
    );
    let queued = crate::support::handoff_names(&hq.join("outbox"));
    assert_eq!(queued.len(), 2, "both replies queued: {queued:?}");
}

/// A `git_handoff` carrying cards reads the swarm once (issue 44.3): the
/// sender's roles.tsv and swarm.yaml, and handoffd's board cache, each
/// opened once for the task and every carried card (the old code read them
/// again for each card: 2+N times).
#[test]
fn a_git_handoff_with_carried_cards_reads_the_swarm_once() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    use crate::cards::{git_handoff, project};
    let p = project(crate::support::Layout::Init);
    p.swarm(&["card", "new", "change", "jump"]).ok();
    p.deliver_once().ok();
    let implementation = crate::cards_guards::carrying(&p, "[\"jump\" \"ghost\" \"ghost2\"]");
    let draft = p.draft("implement", &git_handoff("verify", "jump"));
    let (r, log) = strace(
        &p,
        p.cmd("swarm-handoff").role("implement").arg(draft),
        "trace=openat",
    );
    assert_eq!(r.code, 2, "{r:?}");
    r.stderr_has("- Handoff task_id 'ghost2' is not a current board task.\n");
    assert!(
        crate::support::handoff_names(&crate::support::hq(&implementation, "outbox")).is_empty(),
        "the carried ghosts were not refused"
    );
    for file in ["/swarm.yaml", "/roles.tsv", "/derived.json"] {
        let n = opened(&log, file);
        assert_eq!(n, 1, "{file} opened {n} times:\n{log}");
    }
}

/// `swarm up`'s plan reads swarm.yaml once (issue 44.3: the plan read it a
/// second time for the positions of its roles), seen through `swarm
/// prompt`, which loads the same plan.
#[test]
fn the_plan_reads_swarm_yaml_once() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let d = Project::builder().build();
    d.write(
        "swarm.yaml",
        "roles:\n  - name: a\n    agent: claude\n  - name: b\n    agent: gemini\n",
    );
    let (r, log) = strace(&d, d.cmd("swarm").args(["prompt", "a"]), "trace=openat");
    r.ok().stdout_has("No job was configured for this role");
    let n = opened(&log, "/swarm.yaml");
    assert_eq!(n, 1, "swarm.yaml opened {n} times:\n{log}");
}

/// `swarm status` reads roles.tsv and swarm.yaml once each (issue 44.3),
/// not once per part of the status (the old code opened swarm.yaml 7
/// times; then twice, the attention list's budgets reading it again).
#[test]
fn status_reads_the_swarm_once() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = with_a_card();
    let (r, log) = strace(&p, p.cmd("swarm").args(["status"]), "trace=openat");
    r.ok();
    read_once(&log);
}

/// `swarm search` reads roles.tsv no more for the trail that vouches for
/// its hits than for its files (issue 44.3: the trail read roles.tsv and
/// swarm.yaml again, 4 opens of roles.tsv in all). The three left: the
/// index's staleness check, its refresh, and the files of the query (the
/// index is not yet handed a loaded swarm).
#[test]
fn search_reads_roles_no_more_for_its_trail() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = Project::builder().role("coder").role("qa").build();
    p.send_as(
        "coder",
        "type: note\nto: qa\npriority: 10\nmessage: wumpus\n",
    )
    .ok();
    p.deliver_once().ok();
    let (r, log) = strace(
        &p,
        p.cmd("swarm").args(["search", "wumpus"]),
        "trace=openat",
    );
    r.ok();
    let n = opened(&log, "/roles.tsv");
    assert_eq!(n, 3, "roles.tsv opened {n} times:\n{log}");
}

/// `ready-next` reads roles.tsv and swarm.yaml once each (issue 47.2:
/// parse nothing twice at start-up): the role's row, the card routes and
/// the task documents' role share one read (the old code opened roles.tsv
/// three times), with an item to hand out and without.
#[test]
fn ready_next_reads_the_swarm_once() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = Project::builder().role("coder").role("qa").build();
    for expect in ["NO_TASK", "Take this"] {
        let (r, log) = strace(&p, p.cmd("ready-next").role("qa"), "trace=openat");
        r.ok().stdout_has(expect);
        for file in ["/swarm.yaml", "/roles.tsv"] {
            let n = opened(&log, file);
            assert_eq!(n, 1, "{file} opened {n} times ({expect}):\n{log}");
        }
        p.send_as(
            "coder",
            "type: note\nto: qa\npriority: 10\nmessage: Take this\n",
        )
        .ok();
        p.deliver_once().ok();
    }
}

/// How many times the process strace started (the first pid of `log`,
/// with its threads) loaded `file`: opened it the way `Roles::load` and
/// `Config::load` do (no symlink followed), which a writer comparing the
/// file first does not. A task whose line of descent from that process
/// passes through an `execve` (handoffd, an agent, and their threads) is
/// another program, which reads the swarm in its own process. Needs
/// `execve` and the clone calls in the trace.
fn loaded_by_first(log: &str, file: &str) -> usize {
    use std::collections::{HashMap, HashSet};
    let pid = |l: &str| l.split_whitespace().next().unwrap_or("").to_string();
    let first = log.lines().next().map(pid).unwrap_or_default();
    let mut parent: HashMap<String, String> = HashMap::new();
    let mut execed: HashSet<String> = HashSet::new();
    for l in log.lines() {
        // A call another task interrupted is split in two lines
        // (`execve(… <unfinished ...>`, then `<... execve resumed>) = 0`).
        if (l.contains("execve(") || l.contains("<... execve resumed>")) && l.ends_with("= 0") {
            execed.insert(pid(l));
        }
        if l.contains("clone") || l.contains("fork") {
            if let Some((_, child)) = l.rsplit_once("= ") {
                if !child.is_empty() && child.bytes().all(|b| b.is_ascii_digit()) {
                    parent.insert(child.to_string(), pid(l));
                }
            }
        }
    }
    let ours = |tid: &str| {
        let mut t = tid.to_string();
        while t != first {
            if execed.contains(&t) {
                return false;
            }
            match parent.get(&t) {
                Some(p) => t = p.clone(),
                None => return false,
            }
        }
        true
    };
    let quoted = format!("{file}\"");
    calls(log, "openat")
        .into_iter()
        .filter(|l| l.contains(&quoted) && l.contains("O_NOFOLLOW"))
        .filter(|l| ours(&pid(l)))
        .count()
}

/// `swarm up` itself reads swarm.yaml once (issue 44.3: its plan's config
/// serves the init, each agent's command line, its MCP environment and the
/// secrets it is kept from, and the attention list at the end; each agent
/// start read it twice more). roles.tsv is read three times, each on
/// purpose: the table before `swarm init` rewrites it (person mail moves),
/// and, after the run, the table then (a lineup change may have altered
/// it) for the stray agents to stop and for the people still waited for.
/// handoffd and the agents are other processes and read them there.
#[test]
fn swarm_up_reads_swarm_yaml_once() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = Project::empty();
    p.write(
        "swarm.yaml",
        "launch:\n  stagger: 0ms\nroles:\n  - name: lead\n    agent: human\n  - name: coder\n    agent: sh -c 'exit 0'\n    worktree: coder\n",
    );
    let _guard = crate::support::SwarmGuard::new(&p.root);
    let (up, log) = strace(
        &p,
        p.cmd("swarm")
            .args(["up", "--no-tmux", "--until-idle", "--timeout", "60s"]),
        "trace=openat,execve,clone,clone3,fork,vfork",
    );
    assert_eq!(up.code, 0, "{up:?}");
    for (file, times) in [("/swarm.yaml", 1), ("/roles.tsv", 3)] {
        let n = loaded_by_first(&log, file);
        assert_eq!(n, times, "{file} loaded {n} times:\n{log}");
    }
}

/// `done_with_current.sh` (`done-current --mail-waiting`) with a card open
/// in its lane reads roles.tsv and swarm.yaml once each (issue 44.3): the
/// role's row, the open-cards guard's board, the card routes and the
/// printout share the call's loaded swarm (the guard's board read them
/// again).
#[test]
fn done_with_current_reads_the_swarm_once() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = with_a_card();
    p.cmd("ready-next").role("lead").run().ok();
    let (r, log) = strace(
        &p,
        p.cmd("done-current")
            .role("lead")
            .args(["--mail-waiting", "--drop"]),
        "trace=openat",
    );
    r.ok().stdout_has("DROPPED: jump\n");
    read_once(&log);
}

/// `swarm doctor`, `swarm audit` and `swarm audit --check` read roles.tsv
/// and swarm.yaml once each (issue 44.3): the doctor's context (its plan
/// from the swarm.yaml it read, its trail checks from its table), and each
/// look of the audit (the trail, the board, the bridge's control records,
/// the approval folders, the blocked roles and the spend) share one loaded
/// swarm. Before: the doctor read swarm.yaml 4 times and roles.tsv 3, the
/// check 5 and 4, the audit twice and once.
#[test]
fn doctor_and_audit_read_the_swarm_once() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = with_a_card();
    for args in [&["doctor"][..], &["audit"], &["audit", "--check"]] {
        let (_, log) = strace(
            &p,
            p.cmd("swarm").args(args),
            "trace=openat,execve,clone,clone3,fork,vfork",
        );
        for file in ["/swarm.yaml", "/roles.tsv"] {
            let n = loaded_by_first(&log, file);
            assert_eq!(n, 1, "swarm {args:?}: {file} loaded {n} times:\n{log}");
        }
    }
}

/// `swarm answer` reads roles.tsv and swarm.yaml once each (issue 44.3):
/// the answer's sender keeps the swarm read to find the clarify (it read
/// both files again).
#[test]
fn an_answer_reads_the_swarm_once() {
    if !require_tool("strace", "apt-get install -y strace") {
        return;
    }
    let p = coder_and_qa();
    let id = taken_by_qa(
        &p,
        "type: clarify\nto: qa\npriority: 50\nquestion: Short or long?\n\nshort\nlong\n",
    );
    let (r, log) = strace(
        &p,
        p.cmd("swarm").args(["answer", &id, "--choice", "1"]),
        "trace=openat",
    );
    r.ok();
    read_once(&log);
}
