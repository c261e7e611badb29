//! The cockpit's cost of one live update (docs/cockpit.md, "Live updates"):
//!
//!   cargo bench --bench cockpit -- [--small 100] [--large 50000] [--updates 200] [--dir D]
//!
//! For a trail of `small` and of `large` delivered and completed messages
//! (benches/common `trail_fixture`), the server's model is opened once
//! (timed apart: the one full read), then one message at a time is
//! delivered by the library deliverer and the model applies the watcher's
//! wake for it (the new `sent/` original and the recipient's copy); only
//! the apply is timed. Reports the median and p90 per update at both sizes
//! and their ratio (the goal: within 2x), next to what the page cost
//! before (a trail load plus `swarm status`, per change and per page).
//! Also the server's start-up (the model opened) and `GET /api/audit`: the
//! first request (reads the trail whole) and one after each update (the
//! kept trail brought up to date with the wake's paths, then tallied), with
//! their ratios between the two sizes, measured in the same run.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

mod common;

use swarm_handoff::fsx;
use swarm_handoff::protocol::clock;
use swarm_handoff::protocol::header::{Header, Message};
use swarm_handoff::protocol::layout::{Project, Worktree};
use swarm_handoff::protocol::trail::{Scope, Trail};
use swarm_handoff::serve::kept::Kept;
use swarm_handoff::serve::model::Model;
use swarm_handoff::sys::watch::Wake;
use swarm_handoff::views::audit;

struct Opts {
    small: usize,
    large: usize,
    updates: usize,
    dir: PathBuf,
}

fn opts() -> Opts {
    let f = common::flags();
    Opts {
        small: common::flag(&f, "small", 100),
        large: common::flag(&f, "large", 50_000),
        updates: common::flag(&f, "updates", 200),
        dir: common::flag(&f, "dir", std::env::temp_dir()),
    }
}

struct Figures {
    open: Duration,
    p50: Duration,
    p90: Duration,
    before: Duration,
    audit_first: Duration,
    audit_p50: Duration,
}

fn run(o: &Opts, n: usize) -> Figures {
    let (_d, root) = common::trail_fixture(&o.dir, n);
    let project = Project::new(&root);
    let t = Instant::now();
    let mut model = Model::open(&project).unwrap();
    let open = t.elapsed();
    // What one change cost before: the trail read again (transcript and
    // audit each did) plus `swarm status`.
    let t = Instant::now();
    Trail::load(&project, &Scope::all()).unwrap();
    swarm_handoff::views::status::collect(&project).unwrap();
    let before = t.elapsed();
    let mut kept = Kept::default();
    let audit = |kept: &mut Kept| {
        let t = Instant::now();
        let trail = kept.trail(&project).unwrap();
        let v = audit::json(&audit::report(trail), clock::now());
        assert!(v["overall"].is_object());
        t.elapsed()
    };
    let audit_first = audit(&mut kept);
    let mut audits = Vec::with_capacity(o.updates);

    fsx::set_fsync(false);
    let mut dl = common::deliverer(&project);
    let (s0, r0) = (
        Worktree::new(root.join("s0")),
        Worktree::new(root.join("r0")),
    );
    let mut times = Vec::with_capacity(o.updates);
    // The copies the recipient took since the last update: the watcher
    // names them in the next wake (the model keeps its counts from events).
    let mut taken: Vec<PathBuf> = Vec::new();
    for i in 0..o.updates {
        let id = format!("{}_{:06}_from_s0", clock::idts(clock::now()), 900_000 + i);
        let name = format!("50_{id}_to_r0.handoff");
        let mut m = Message::default();
        m.set(Header::Id, &id);
        m.set(Header::From, "s0");
        m.set(Header::To, "r0");
        m.set(Header::Priority, "50");
        m.set(Header::Type, "note");
        m.set(Header::Message, format!("live update {i}"));
        m.set(Header::CreatedAt, clock::iso_now());
        m.body = format!("live update {i}\n");
        fsx::publish(
            &s0.outbox_tmp(),
            &s0.outbox().join(&name),
            m.render().as_bytes(),
        )
        .unwrap();
        assert_eq!(dl.pass().delivered, 1);
        let copies: Vec<PathBuf> = fs::read_dir(r0.inbox_new())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        let mut wake = Wake::default();
        wake.paths.push(s0.outbox().join(&name));
        wake.paths.push(s0.sent().join(&name));
        wake.paths.extend(copies.iter().cloned());
        wake.paths.append(&mut taken);
        let t = Instant::now();
        let deltas = model.apply(&wake);
        times.push(t.elapsed());
        kept.note(&wake);
        audits.push(audit(&mut kept));
        assert!(
            deltas
                .iter()
                .any(|d| d.event == "message" && d.data.contains(&id)),
            "no message delta for {id}"
        );
        // The recipient takes it (untimed): its inbox stays as small at
        // both sizes.
        for c in copies {
            let _ = fs::remove_file(&c);
            taken.push(c);
        }
    }
    fsx::set_fsync(true);
    times.sort();
    audits.sort();
    Figures {
        open,
        p50: times[times.len() / 2],
        p90: times[times.len() * 9 / 10],
        before,
        audit_first,
        audit_p50: audits[audits.len() / 2],
    }
}

fn main() {
    let o = opts();
    println!(
        "cockpit: one live update (a delivered message), {} updates per size",
        o.updates
    );
    let small = run(&o, o.small);
    let large = run(&o, o.large);
    for (n, f) in [(o.small, &small), (o.large, &large)] {
        println!(
            "  {n:>6} messages: update p50 {:.0} us, p90 {:.0} us; model opened once in {:.1} ms; before (trail + status per change) {:.1} ms",
            common::us(f.p50),
            common::us(f.p90),
            f.open.as_secs_f64() * 1e3,
            f.before.as_secs_f64() * 1e3,
        );
    }
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    println!(
        "  ratio {} / {} messages (p50): {:.2}x (goal: within 2x)",
        o.large,
        o.small,
        ratio(large.p50, small.p50)
    );
    for (n, f) in [(o.small, &small), (o.large, &large)] {
        println!(
            "  {n:>6} messages: start-up (model opened) {:.1} ms; /api/audit first {:.1} ms, after an update p50 {:.1} ms",
            f.open.as_secs_f64() * 1e3,
            f.audit_first.as_secs_f64() * 1e3,
            f.audit_p50.as_secs_f64() * 1e3,
        );
    }
    println!(
        "  ratio {} / {} messages: start-up {:.1}x, /api/audit first {:.1}x, after an update {:.1}x",
        o.large,
        o.small,
        ratio(large.open, small.open),
        ratio(large.audit_first, small.audit_first),
        ratio(large.audit_p50, small.audit_p50),
    );
}
