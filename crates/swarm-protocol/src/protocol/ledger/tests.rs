//! The ledger's crash test: a child process (this test binary again) runs
//! one request through a toy feature built the way the stores are, and is
//! SIGKILLed after each durable step in turn; a second child, itself killed
//! after each of its steps in turn, and then a third, carry it on. Two
//! shapes, as the two stores on the ledger: [`TOY`] (seat requests: a
//! sender that publishes again until its request is taken, a worker that
//! starts, does its effect, keeps an answer, tells it and retires) and
//! [`TAKEN`] (a confined agent's forum requests: taken from the asker's
//! folder, a mark of the state before beside it, answered there). After all of them: the effect
//! happened once, one answer was told (the kept one, checked by the worker
//! each time it tells it again), and nothing but the tombstone and the lock
//! is left.

use std::path::Path;

use super::crash::{self, kill_at_every_step, pause};
use super::*;

const ID: &str = "00000000000000aa";
const MAX: u64 = 1024;
/// This file's child (`crash::run` runs it).
const CHILD_TEST: &str = "protocol::ledger::tests::crash_child";

fn toy_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Shaped as seat requests: every state kept, a tombstone, a lock.
static TOY: Spec = Spec {
    request: ".request",
    started: Some(".started"),
    answer: Some(".note"),
    companions: &[".mark"],
    done: Some("done"),
    lock: Some(".lock"),
    valid_id: toy_id,
};

/// Shaped as a confined agent's forum requests: taken from the asker's
/// folder, a mark beside, answered into the asker's folder.
static TAKEN: Spec = Spec {
    request: ".request",
    started: None,
    answer: None,
    companions: &[".mark"],
    done: None,
    lock: None,
    valid_id: toy_id,
};

/// The toy feature's whole run, as a daemon's start does it.
fn daemon(root: &Path) {
    let ledger = Ledger::new(root.join("ledger"), &TOY);
    // The sender: its original goes (here: as late as it can, after the
    // request was carried out) only once the request is durable, so until
    // then every start publishes it again.
    let sent = root.join("sent");
    if !sent.exists() {
        ledger.publish(ID, b"do it\n").unwrap();
    }
    for id in ledger.pending() {
        carry_out(&ledger, root, &id);
    }
    if !sent.exists() {
        fsx::publish(root, &sent, b"").unwrap();
        pause("sent");
    }
    ledger.sweep().unwrap();
}

fn carry_out(ledger: &Ledger, root: &Path, id: &str) {
    let _lock = ledger.lock(id).unwrap();
    let Some(request) = ledger.read_request(id, MAX).unwrap() else {
        return;
    };
    assert_eq!(request, b"do it\n");
    let effects = root.join("effects");
    let happened = || {
        std::fs::read_to_string(&effects)
            .unwrap_or_default()
            .lines()
            .any(|l| l == id)
    };
    // Again: the effect is done only when the toy's own state lacks it.
    if ledger.start(id).unwrap() == Start::First || !happened() {
        fsx::append(&effects, format!("{id}\n").as_bytes()).unwrap();
        pause("effect");
        let mark = ledger.dir().join(format!("{id}.mark"));
        if !mark.exists() {
            fsx::publish(ledger.dir(), &mark, b"").unwrap();
            pause("mark");
        }
    }
    let answer = ledger
        .answer_once(id, MAX, || {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            Ok(format!("answer {nanos} {}\n", std::process::id()).into_bytes())
        })
        .unwrap();
    let outbox = root.join("outbox");
    fsx::ensure_dirs(&[&outbox]).unwrap();
    let told = outbox.join(id);
    if told.exists() {
        assert_eq!(
            std::fs::read(&told).unwrap(),
            answer,
            "told twice, differently"
        );
    } else {
        fsx::publish(&outbox, &told, &answer).unwrap();
        pause("told");
    }
    ledger.retire(id).unwrap();
}

/// The [`TAKEN`] feature's run: first what a killed run took, then what
/// waits in the asker's folder (put there by the parent, as an agent does).
fn taken_daemon(root: &Path) {
    let ledger = Ledger::new(root.join("taken"), &TAKEN);
    let asks = fsx::HeldDir::open(&root.join("asks")).unwrap();
    for id in ledger.pending() {
        answer_taken(&ledger, root, &asks, &id);
    }
    ledger.sweep().unwrap();
    for id in ledger.ids_among(asks.names().unwrap()) {
        let name = format!("{id}.request");
        if ledger.admit(&asks, &name, &id).unwrap() {
            answer_taken(&ledger, root, &asks, &id);
        } else {
            asks.remove(&name).unwrap();
        }
    }
}

fn answer_taken(ledger: &Ledger, root: &Path, asks: &fsx::HeldDir, id: &str) {
    let Some(request) = ledger.read_request(id, MAX).unwrap() else {
        return;
    };
    assert_eq!(request, b"do it\n");
    // A count raised once, as an audit count is: the mark keeps the count
    // before, and the effect sets it one above that (board::count_audit_once).
    let count = root.join("count");
    let mark = ledger.dir().join(format!("{id}.mark"));
    let before = match std::fs::read_to_string(&mark) {
        Ok(b) => b,
        Err(_) => {
            let b = std::fs::read_to_string(&count).unwrap_or_else(|_| "0".into());
            fsx::publish(ledger.dir(), &mark, b.as_bytes()).unwrap();
            pause("mark");
            b
        }
    };
    let after = before.parse::<u32>().unwrap() + 1;
    fsx::replace(root, &count, after.to_string().as_bytes()).unwrap();
    pause("effect");
    let answer = format!("{id}.answer");
    asks.remove(&answer).unwrap();
    asks.publish(&answer, b"done\n").unwrap();
    pause("answered");
    ledger.retire(id).unwrap();
}

/// The child's side: runs only in a child of the harness.
#[test]
fn crash_child() {
    let Some(root) = crash::child() else {
        return;
    };
    let root = root.as_path();
    if root.join("asks").exists() {
        taken_daemon(root);
    } else {
        daemon(root);
    }
}

/// What every run ends with.
fn check(root: &Path, after: &str) {
    let effects = std::fs::read_to_string(root.join("effects")).unwrap_or_default();
    assert_eq!(effects, format!("{ID}\n"), "the effect once, {after}");
    assert!(root.join("outbox").join(ID).is_file(), "told, {after}");
    let dir = root.join("ledger");
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["00000000000000aa.lock", "done"], "{after}");
    assert!(dir.join("done").join(ID).is_file(), "{after}");
}

/// What every run of the [`TAKEN`] feature ends with.
fn check_taken(root: &Path, after: &str) {
    let names = |d: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(root.join(d))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    let count = std::fs::read_to_string(root.join("count")).unwrap();
    assert_eq!(count, "1", "the effect once, {after}");
    assert_eq!(names("asks"), [format!("{ID}.answer")], "{after}");
    let answer = std::fs::read_to_string(root.join("asks").join(format!("{ID}.answer")));
    assert_eq!(answer.unwrap(), "done\n", "{after}");
    assert!(names("taken").is_empty(), "{after}");
}

#[test]
fn a_request_killed_after_any_step_is_carried_on_once() {
    let kills = kill_at_every_step(CHILD_TEST, |_| {}, check);
    // Steps: requested, started, effect, mark, answered, told, tombstoned,
    // the four removals, and sent.
    assert!(kills >= 12, "only {kills} kills");
    eprintln!("ledger crash test (kept): {kills} SIGKILLs, each carried on once");
}

#[test]
fn a_request_taken_from_another_folder_killed_after_any_step_is_carried_on_once() {
    let asks = |root: &Path| {
        let asks = root.join("asks");
        fsx::ensure_dirs(&[&asks]).unwrap();
        let f = asks.join(format!("{ID}.request"));
        fsx::publish(&asks, &f, b"do it\n").unwrap();
    };
    let kills = kill_at_every_step(CHILD_TEST, asks, check_taken);
    // Steps: admitted, mark, effect, answered, and the two removals.
    assert!(kills >= 6, "only {kills} kills");
    eprintln!("ledger crash test (taken): {kills} SIGKILLs, each carried on once");
}

/// A request published again after it was retired is not taken again; one
/// published twice is one request.
#[test]
fn a_request_is_taken_once() {
    let d = tempfile::tempdir().unwrap();
    let ledger = Ledger::new(d.path().join("l"), &TOY);
    assert!(ledger.publish(ID, b"a").unwrap());
    assert!(!ledger.publish(ID, b"b").unwrap());
    assert_eq!(ledger.pending(), [ID]);
    assert_eq!(ledger.start(ID).unwrap(), Start::First);
    assert_eq!(ledger.start(ID).unwrap(), Start::Again);
    ledger.retire(ID).unwrap();
    assert!(ledger.pending().is_empty());
    assert!(!ledger.publish(ID, b"a").unwrap());
    assert!(ledger.pending().is_empty());
}
