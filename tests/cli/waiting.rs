//! Waiting for a person is a state, not a stall (issue 42.5,
//! docs/headless.md "Waiting for a person"): an agent that follows its
//! primer's "Asking a person" (send a clarify, leave the item in process,
//! end the turn) is `waiting for <person>` in `swarm status`, is not started
//! again until mail arrives, and is woken once the answer arrives, with no
//! stall back-off; `swarm up --until-idle` exits 3 naming the question and
//! the command that answers it.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// The primer's five steps, as a scripted agent does them; each run is
/// logged in `runs.lead` in its worktree (`took`, `asked`, `woken`,
/// `answered`, `none`).
const LEAD: &str = r#"log="$PWD/runs.lead"
out=$(ready_for_next.sh)
case "$out" in
  *NO_TASK*) echo none >>"$log"; exit 0 ;;
esac
if printf '%s\n' "$out" | grep -q '^ANSWER:'; then
  # 4-5. Woken: the same item with the answer; finish it.
  echo answered >>"$log"
  done_with_current.sh >/dev/null
  exit 0
fi
if [ -e "$PWD/asked" ]; then
  # Woken without an answer: the item stays parked, the turn ends.
  echo woken >>"$log"
  exit 0
fi
# 1. Send a clarify to the person. 2. No done_with_current.sh. 3. End the turn.
printf 'type: clarify\nto: boss\npriority: 10\nquestion: Ship on Friday?\n\nYes\nNo\n' >"$PWD/ask.txt"
swarm-handoff "$PWD/ask.txt" >/dev/null
: >"$PWD/asked"
echo asked >>"$log"
"#;

/// `lead` (the scripted agent above, in `.worktrees/lead`) and `boss` (a
/// person), with an item from boss already queued for lead.
pub(crate) fn lead_and_boss() -> Project {
    let p = Project::empty();
    p.write("agents/lead.sh", LEAD);
    p.write(
        "swarm.yaml",
        &format!(
            "launch:\n  stagger: 0ms\nroles:\n  - name: lead\n    agent: sh {}\n    worktree: lead\n  - name: boss\n    agent: human\n",
            p.path("agents/lead.sh").display()
        ),
    );
    p.swarm(&["init"]).ok();
    p.send(
        "boss",
        "type: note\nto: lead\npriority: 20\nmessage: plan the release\n",
    )
    .ok();
    p
}

fn runs(p: &Project) -> Vec<String> {
    fs::read_to_string(p.path(".worktrees/lead/runs.lead"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn lead(p: &Project) -> Value {
    let st = p.swarm(&["status", "--json"]).ok().json();
    st["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "lead")
        .cloned()
        .unwrap()
}

/// The open clarify's id, from the person's inbox.
fn question(p: &Project) -> String {
    let inbox = p.swarm(&["inbox", "--json"]).ok().json();
    inbox["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "clarify")
        .and_then(|i| i["id"].as_str())
        .unwrap_or_else(|| panic!("no clarify in {inbox}"))
        .to_string()
}

/// Waits until lead waits for boss; no run followed the asking one.
pub(crate) fn waits_for_boss(p: &Project) {
    wait_until(DEADLINE, "lead waiting for boss in status", || {
        let l = lead(p);
        l["agent_state"] == "waiting" && l["waiting_for"] == serde_json::json!(["boss"])
    });
    p.swarm(&["status"])
        .ok()
        .stdout_has("lead: agent waiting for boss");
    let r = runs(p);
    assert_eq!(r.last().map(String::as_str), Some("asked"), "{r:?}");
}

/// Answers the clarify and waits (deadline) for lead to finish the item
/// with it; prints how long the wake-up took.
fn answer_wakes_lead(p: &Project, mode: &str) {
    let id = question(p);
    let before = runs(p).len();
    p.swarm(&["answer", &id, "--choice", "1"]).ok();
    let asked_at = Instant::now();
    // The deadline is the assertion: well within the stall back-off
    // (11-14 s) that woke it before, with room for a loaded machine.
    wait_until(Duration::from_secs(5), "lead woken by the answer", || {
        runs(p).contains(&"answered".to_string())
    });
    eprintln!(
        "{mode}: lead ran with the answer {:.2} s after `swarm answer` returned",
        asked_at.elapsed().as_secs_f64()
    );
    let r = runs(p);
    assert_eq!(r[before..], ["answered"], "{r:?}");
    wait_until(DEADLINE, "the item completed", || {
        !handoff_names(&p.path(".worktrees/lead/.swarmforge/handoffs/inbox/completed")).is_empty()
            && lead(p)["agent_state"] != "waiting"
    });
}

#[test]
fn headless_until_idle_exits_3_naming_the_open_question() {
    let p = lead_and_boss();
    let mut guard = SwarmGuard::new(&p.root);
    guard.guard(
        p.cmd("swarm")
            .args(["up", "--no-tmux", "--until-idle", "--timeout", "60s"])
            .start(),
    );
    let up = guard.finish(Duration::from_secs(90), "swarm up --until-idle returns");
    assert_eq!(up.code, 3, "{up:?}");
    let id = question(&p);
    up.stderr_has("swarm up: idle, but 1 item(s) wait for a person:")
        .stderr_has(&format!("clarify  {id}"))
        .stderr_has("Ship on Friday?")
        .stderr_has(&format!("  -> swarm answer {id}"));
    assert!(!up.stderr.contains("stalled"), "{}", up.stderr);
    up.stdout_has("lead: waits for boss (clarify ");
    // Never started again while it waited.
    let r = runs(&p);
    assert_eq!(r.last().map(String::as_str), Some("asked"), "{r:?}");
    assert!(!r.contains(&"woken".to_string()), "{r:?}");
}

#[test]
fn headless_waiting_agent_is_woken_by_the_answer() {
    let p = lead_and_boss();
    let _guard = SwarmGuard::new(&p.root);
    p.swarm(&["up", "--no-tmux", "--detach"]).ok();
    waits_for_boss(&p);
    answer_wakes_lead(&p, "headless");
    p.swarm(&["down"]).ok();
}

#[test]
fn tmux_waiting_agent_is_woken_by_the_answer() {
    if !require_tool("tmux", "apt-get install -y tmux") {
        return;
    }
    let p = lead_and_boss();
    let mut guard = SwarmGuard::new(&p.root);
    let up = p.swarm(&["up", "--detach"]);
    guard.socket = Some(PathBuf::from(p.read(".swarmforge/tmux-socket").trim()));
    up.ok();
    waits_for_boss(&p);
    answer_wakes_lead(&p, "tmux");
}

/// Takes its item and then makes no progress (each run `stalled`), until
/// mail lands in its inbox: then it finishes the item (`woken`).
const STALLER: &str = r#"log="$PWD/runs.lead"
if [ -e "$PWD/took" ] && ls .swarmforge/handoffs/inbox/new/*.handoff >/dev/null 2>&1; then
  echo woken >>"$log"
  done_with_current.sh >/dev/null
  exit 0
fi
if [ ! -e "$PWD/took" ]; then
  ready_for_next.sh >/dev/null
  : >"$PWD/took"
  echo took >>"$log"
  exit 0
fi
echo stalled >>"$log"
"#;

/// Mail that reaches an agent backing off after runs that changed nothing
/// (issue 47.4: an answer to a parked agent wakes it as fast as any other
/// mail) starts it at once: the back-off waits out runs that change
/// nothing, not new work. Four stalls in, the back-off is 8 s; the
/// supervisor says it cut it short, which it never said before.
#[test]
fn headless_mail_cuts_a_stall_back_off_short() {
    let p = lead_and_boss();
    p.write("agents/lead.sh", STALLER);
    let _guard = SwarmGuard::new(&p.root);
    p.swarm(&["up", "--no-tmux", "--detach"]).ok();
    // Run 1 took the item; runs 2 to 5 changed nothing. Once the fifth
    // has ended (not merely logged), the fourth back-off runs.
    wait_until(DEADLINE, "four runs that changed nothing, ended", || {
        fs::read_to_string(p.path(".swarmforge/daemon/swarm-up.out"))
            .is_ok_and(|o| o.contains("lead: run 5 ended"))
    });
    p.send(
        "boss",
        "type: note\nto: lead\npriority: 20\nmessage: go on\n",
    )
    .ok();
    wait_until(DEADLINE, "lead woken by the mail", || {
        runs(&p).contains(&"woken".to_string())
    });
    let out = p.read(".swarmforge/daemon/swarm-up.out");
    assert!(
        out.contains("lead: mail arrived; back-off cut short"),
        "{out}"
    );
    let r = runs(&p);
    assert_eq!(r.iter().filter(|r| *r == "stalled").count(), 4, "{r:?}");
    p.swarm(&["down"]).ok();
}

/// Logs what its first look found (`first NO_TASK` or `first <message>`),
/// then drains its queue.
const FIRST_LOOK: &str = r#"log="$PWD/runs.lead"
out=$(ready-next 2>&1)
case "$out" in
  *NO_TASK*) what=NO_TASK ;;
  *) what=$(printf '%s\n' "$out" | grep -o 'msg-[a-z]*' | head -n 1); done-current >/dev/null 2>&1 ;;
esac
[ -e "$PWD/looked" ] || echo "first $what" >>"$log"
: >"$PWD/looked"
"#;

/// Mail a person queued before `swarm up` is in the agent's inbox when the
/// agent starts: `swarm up` starts the agents once the daemon's first
/// delivery emptied the outboxes (bounded). A backlog ahead of the agent's
/// item (60 notes to another person, in the same outbox) makes that first
/// pass long enough that an agent started at once looked first and found
/// nothing, as it did before.
#[test]
fn mail_queued_before_up_is_there_at_the_agents_first_look() {
    let p = lead_and_boss();
    p.write("agents/lead.sh", FIRST_LOOK);
    let yaml = p.read("swarm.yaml");
    p.write(
        "swarm.yaml",
        &format!("{yaml}  - name: clerk\n    agent: human\n"),
    );
    p.swarm(&["init"]).ok();
    // lead_and_boss queued one item for lead already; take it back out of
    // the way so the only one is behind the backlog.
    let outbox = p.path(".swarmforge/people/boss/.swarmforge/handoffs/outbox");
    for name in handoff_names(&outbox) {
        fs::remove_file(outbox.join(name)).unwrap();
    }
    for i in 0..60 {
        p.send(
            "boss",
            &format!("type: note\nto: clerk\npriority: 20\nmessage: filler {i}\n"),
        )
        .ok();
    }
    p.send(
        "boss",
        "type: note\nto: lead\npriority: 20\nmessage: msg-first\n",
    )
    .ok();
    let _guard = SwarmGuard::new(&p.root);
    p.swarm(&["up", "--no-tmux", "--detach"]).ok();
    wait_until(DEADLINE, "lead's first look", || !runs(&p).is_empty());
    assert_eq!(runs(&p)[0], "first msg-first", "{:?}", runs(&p));
    p.swarm(&["down"]).ok();
}
