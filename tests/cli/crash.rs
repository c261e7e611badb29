//! Crash injection (issue 8): a steady flow of senders, task and batch
//! receivers and the daemon, each SIGKILLed at random moments and restarted;
//! afterwards every message must be at each recipient exactly once, completed
//! at most once, nothing half-written, nothing ambiguous in process.
//!
//! CI runs a short version; `scripts/crash-harness.sh [rounds]` runs a long one
//! (`CRASH_ROUNDS`, `CRASH_SEED` override the defaults).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::{bin, clean_command, wait_until, Project};

/// xorshift64*: reproducible from the printed seed, no extra dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const SENDERS: &[&str] = &["s0", "s1"];
/// (role, mode)
const RECEIVERS: &[(&str, &str)] = &[("r0", "task"), ("r1", "batch")];

struct Swarm {
    project: Project,
}

impl Swarm {
    fn new() -> Swarm {
        let project = Project::new(&[]);
        let root = project.root.clone();
        let mut tsv = String::new();
        for s in SENDERS {
            tsv.push_str(&format!(
                "{s}\t{s}\t{}\tsession\tS\tscript\ttask\n",
                root.join(s).display()
            ));
        }
        for (r, mode) in RECEIVERS {
            tsv.push_str(&format!(
                "{r}\t{r}\t{}\tsession\tR\tscript\t{mode}\n",
                root.join(r).display()
            ));
        }
        project.write_roles_raw(&tsv);
        for name in SENDERS.iter().chain(RECEIVERS.iter().map(|(r, _)| r)) {
            let wt = root.join(name);
            fs::create_dir_all(wt.join(".swarmforge/handoffs")).unwrap();
            fs::write(
                wt.join(".swarmforge/project-root"),
                format!("{}\n", root.display()),
            )
            .unwrap();
        }
        Swarm { project }
    }

    fn wt(&self, role: &str) -> PathBuf {
        self.project.root.join(role)
    }

    fn spawn(&self, program: &str, role: &str, args: &[&str]) -> Child {
        let mut c = clean_command(&bin(program), &self.wt(role));
        c.env("SWARMFORGE_ROLE", role)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c.spawn().expect("spawn")
    }

    fn spawn_send(&self, sender: &str, n: u64, to: &str) -> Child {
        let draft = self.wt(sender).join(format!("draft-{n}.txt"));
        fs::write(
            &draft,
            format!(
                "type: note\nto: {to}\npriority: {:02}\nmessage: m{n}\n",
                n % 3 * 10
            ),
        )
        .unwrap();
        self.spawn("swarm-handoff", sender, &[draft.to_str().unwrap()])
    }

    fn spawn_daemon(&self) -> Child {
        clean_command(&bin("handoffd"), &self.project.root)
            .arg(&self.project.root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("handoffd")
    }
}

fn kill(c: &mut Child) {
    let _ = c.kill();
    let _ = c.wait();
}

fn handoffs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "handoff"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every copy held by a recipient: (file name → paths), over new, in_process,
/// completed and their batch directories.
fn copies(wt: &Path) -> HashMap<String, Vec<PathBuf>> {
    let inbox = wt.join(".swarmforge/handoffs/inbox");
    let mut out: HashMap<String, Vec<PathBuf>> = HashMap::new();
    for sub in ["new", "in_process", "completed"] {
        let dir = inbox.join(sub);
        let mut dirs = vec![dir.clone()];
        if let Ok(rd) = fs::read_dir(&dir) {
            dirs.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
        for d in dirs {
            for p in handoffs(&d) {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                out.entry(name).or_default().push(p);
            }
        }
    }
    out
}

fn rounds() -> u64 {
    std::env::var("CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

#[test]
fn sigkill_anywhere_delivers_exactly_once() {
    let seed = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("crash harness: seed {seed}, {} rounds", rounds());
    let mut rng = Rng(seed);
    let swarm = Swarm::new();
    let mut daemon = swarm.spawn_daemon();
    let mut live: Vec<Child> = Vec::new();
    let mut kills = BTreeMap::<&str, u64>::new();
    let mut n = 0;
    for _ in 0..rounds() {
        n += 1;
        let action = rng.below(10);
        let child = match action {
            0..=3 => {
                let sender = SENDERS[rng.below(SENDERS.len() as u64) as usize];
                let to = match rng.below(3) {
                    0 => "r0",
                    1 => "r1",
                    _ => "r0,r1",
                };
                Some(("sender", swarm.spawn_send(sender, n, to)))
            }
            4..=7 => {
                let (r, _) = RECEIVERS[rng.below(RECEIVERS.len() as u64) as usize];
                let prog = if rng.below(2) == 0 {
                    "ready-next"
                } else {
                    "done-current"
                };
                Some(("receiver", swarm.spawn(prog, r, &[])))
            }
            8 => {
                std::thread::sleep(Duration::from_micros(rng.below(3000)));
                kill(&mut daemon);
                *kills.entry("handoffd").or_default() += 1;
                daemon = swarm.spawn_daemon();
                None
            }
            _ => None,
        };
        if let Some((kind, mut c)) = child {
            if rng.below(3) == 0 {
                // Kill somewhere inside its run.
                std::thread::sleep(Duration::from_micros(rng.below(4000)));
                if c.try_wait().ok().flatten().is_none() {
                    *kills.entry(kind).or_default() += 1;
                }
                kill(&mut c);
            } else {
                live.push(c);
            }
        }
        // Bound the number of concurrent processes.
        while live.len() > 6 {
            let mut c = live.remove(0);
            let _ = c.wait();
        }
    }
    for mut c in live.drain(..) {
        let _ = c.wait();
    }
    eprintln!("crash harness: SIGKILLs {kills:?}");

    // Drain: the daemon delivers everything left; receivers finish everything.
    let outboxes: Vec<PathBuf> = SENDERS
        .iter()
        .map(|s| swarm.wt(s).join(".swarmforge/handoffs/outbox"))
        .collect();
    wait_until(Duration::from_secs(60), "outboxes drained", || {
        outboxes.iter().all(|o| handoffs(o).is_empty())
    });
    kill(&mut daemon);
    for (r, _) in RECEIVERS {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < end, "receiver {r} drained");
            let out = clean_command(&bin("done-current"), &swarm.wt(r))
                .env("SWARMFORGE_ROLE", r)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("AMBIGUOUS"), "ambiguous state at {r}: {err}");
            assert!(
                !err.contains("MALFORMED"),
                "half-written item at {r}: {err}"
            );
            if text.ends_with("NO_TASK\n") || err.starts_with("NO_CURRENT") {
                let ready = clean_command(&bin("ready-next"), &swarm.wt(r))
                    .env("SWARMFORGE_ROLE", r)
                    .output()
                    .unwrap();
                if String::from_utf8_lossy(&ready.stdout) == "NO_TASK\n" {
                    break;
                }
            }
        }
    }

    // Check: every original at each recipient exactly once, completed, whole.
    let held: HashMap<&str, HashMap<String, Vec<PathBuf>>> = RECEIVERS
        .iter()
        .map(|(r, _)| (*r, copies(&swarm.wt(r))))
        .collect();
    let mut originals = 0;
    for s in SENDERS {
        let h = swarm.wt(s).join(".swarmforge/handoffs");
        assert!(
            handoffs(&h.join("failed")).is_empty(),
            "nothing refused at {s}"
        );
        for p in handoffs(&h.join("sent")) {
            originals += 1;
            let text = fs::read_to_string(&p).unwrap();
            let to = text
                .lines()
                .find_map(|l| l.strip_prefix("to: "))
                .expect("to header")
                .to_string();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            for r in to.split(',') {
                let found = held[r].get(&name).map(Vec::len).unwrap_or(0);
                assert_eq!(found, 1, "{name} held {found} times by {r}");
                let copy = &held[r][&name][0];
                assert!(
                    copy.to_string_lossy().contains("/inbox/completed/"),
                    "{} completed",
                    copy.display()
                );
                let c = fs::read_to_string(copy).unwrap();
                for h in [
                    "enqueued_at: ",
                    "dequeued_at: ",
                    "completed_at: ",
                    "recipient: ",
                ] {
                    assert_eq!(c.matches(h).count(), 1, "{h} once in {}", copy.display());
                }
                assert!(
                    c.ends_with(&format!("{}\n", text.lines().last().unwrap())),
                    "whole body"
                );
            }
        }
    }
    let total: usize = held.values().map(|m| m.len()).sum();
    let expected: usize = SENDERS
        .iter()
        .flat_map(|s| handoffs(&swarm.wt(s).join(".swarmforge/handoffs/sent")))
        .map(|p| {
            fs::read_to_string(p)
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("to: ").map(|t| t.split(',').count()))
                .unwrap()
        })
        .sum();
    assert_eq!(total, expected, "no inbox copy without an original");
    eprintln!("crash harness: {originals} messages, {total} copies, all exactly once");
    assert!(originals > 0, "the flow sent something");
}
