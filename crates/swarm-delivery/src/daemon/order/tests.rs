use super::heads::heads;
use super::name;
use super::*;
use crate::protocol::order::Answer;

fn names(a: &Answer) -> Vec<&str> {
    a.head.iter().map(String::as_str).collect()
}

/// An index whose listings are run by [`Ix::answer`] itself.
struct Ix {
    index: Index,
    jobs: mpsc::Receiver<Option<Job>>,
}

impl Ix {
    fn new() -> Ix {
        let (tx, jobs) = mpsc::channel();
        Ix {
            index: Index::new(tx).unwrap(),
            jobs,
        }
    }

    fn list(&mut self) {
        while let Ok(Some(job)) = self.jobs.try_recv() {
            let listed = Entries::list(&job.fd);
            self.index.swap_in(&job, listed);
        }
    }

    fn answer(&mut self, dir: &Path) -> io::Result<Answer> {
        self.ask(Ask::Head, dir)
    }

    fn ask(&mut self, ask: Ask, dir: &Path) -> io::Result<Answer> {
        for _ in 0..3 {
            if let Found::Answer(a) = self.index.answer(ask, dir)? {
                return Ok(a);
            }
            self.list();
        }
        Err(io::Error::other("never listed"))
    }

    /// Reads every unread head, as the lister does between listings.
    fn read(&mut self) {
        let todo = self.index.unread(usize::MAX);
        let said = heads(&todo);
        self.index.record(&todo, &said);
    }
}

#[test]
fn only_items_that_may_be_answers_are_named_once_their_heads_are_read() {
    let d = tempfile::tempdir().unwrap();
    let new = d.path().join("new");
    std::fs::create_dir(&new).unwrap();
    let n = |s: u32| format!("50_20260615T140531Z_{s:06}_from_a_to_b.handoff");
    let msg = |t: &str| format!("id: x\ntype: {t}\n\nbody\n");
    for s in 1..=40 {
        std::fs::write(new.join(n(s)), msg("note")).unwrap();
    }
    std::fs::write(new.join(n(41)), msg("answer")).unwrap();
    let mut ix = Ix::new();
    // Unread: more than HEAD items may be answers, none named (the
    // caller reads the folder itself).
    let a = ix.ask(Ask::Answers, &new).unwrap();
    assert_eq!((a.items, a.head.len()), (41, 0));
    ix.read();
    let a = ix.ask(Ask::Answers, &new).unwrap();
    assert_eq!((a.items, names(&a)), (1, vec![n(41).as_str()]));
    // Arrived since: unread, so named beside the answer, in order.
    std::fs::write(new.join(n(0)), msg("note")).unwrap();
    let a = ix.ask(Ask::Answers, &new).unwrap();
    assert_eq!(names(&a), [n(0), n(41)]);
    ix.read();
    // A note replaced by an answer under its name: read again.
    let tmp = d.path().join("tmp");
    std::fs::write(&tmp, msg("answer")).unwrap();
    std::fs::rename(&tmp, new.join(n(7))).unwrap();
    let a = ix.ask(Ask::Answers, &new).unwrap();
    assert_eq!(names(&a), [n(7), n(41)]);
    ix.read();
    // A new listing keeps what was read: nothing unread after it.
    let f = ix.index.folders.get_mut(&new).unwrap();
    f.listed = Instant::now() - Duration::from_secs(3600);
    ix.index.relist_older(Duration::from_secs(1));
    ix.list();
    let a = ix.ask(Ask::Answers, &new).unwrap();
    assert_eq!(
        (a.items, names(&a)),
        (2, vec![n(7).as_str(), n(41).as_str()])
    );
    // Taken: gone from the answers.
    std::fs::remove_file(new.join(n(41))).unwrap();
    assert_eq!(names(&ix.ask(Ask::Answers, &new).unwrap()), [n(7)]);
}

#[test]
fn a_read_of_an_item_replaced_meanwhile_is_dropped() {
    let d = tempfile::tempdir().unwrap();
    let new = d.path().join("new");
    std::fs::create_dir(&new).unwrap();
    let n = "50_20260615T140531Z_000001_from_a_to_b.handoff";
    std::fs::write(new.join(n), "id: x\ntype: note\n\nb\n").unwrap();
    let mut ix = Ix::new();
    ix.ask(Ask::Answers, &new).unwrap();
    let todo = ix.index.unread(usize::MAX);
    let said = heads(&todo);
    assert_eq!(said, [Some(false)]);
    // Replaced by an answer between the read and its record.
    let tmp = d.path().join("tmp");
    std::fs::write(&tmp, "id: x\ntype: answer\n\nb\n").unwrap();
    std::fs::rename(&tmp, new.join(n)).unwrap();
    ix.index.drain();
    ix.index.record(&todo, &said);
    assert_eq!(names(&ix.ask(Ask::Answers, &new).unwrap()), [n]);
}

#[test]
fn events_keep_the_order_and_a_replaced_folder_is_listed_again() {
    let d = tempfile::tempdir().unwrap();
    let new = d.path().join("new");
    std::fs::create_dir(&new).unwrap();
    let n = |p: u32, s: u32| format!("{p}_20260615T140531Z_{s:06}_from_a_to_b.handoff");
    std::fs::write(new.join(n(50, 2)), "x").unwrap();
    let mut ix = Ix::new();
    let a = ix.answer(&new).unwrap();
    assert_eq!(names(&a), [n(50, 2)]);
    // Placed behind the index's back, by anyone: seen at the next answer.
    std::fs::write(new.join(n(10, 9)), "x").unwrap();
    std::fs::write(new.join(n(50, 1)), "x").unwrap();
    std::fs::write(new.join("bad name.handoff"), "x").unwrap();
    std::fs::write(new.join("ignored.txt"), "x").unwrap();
    std::fs::create_dir(new.join("x.handoff")).unwrap();
    let a = ix.answer(&new).unwrap();
    assert_eq!(names(&a), [n(10, 9), n(50, 1), n(50, 2)]);
    assert_eq!((a.items, a.odd), (3, 1));
    std::fs::rename(new.join(n(10, 9)), d.path().join("out")).unwrap();
    std::fs::remove_file(new.join("bad name.handoff")).unwrap();
    let a = ix.answer(&new).unwrap();
    assert_eq!(names(&a), [n(50, 1), n(50, 2)]);
    assert_eq!(a.odd, 0);
    // The folder replaced: the index lists the new one.
    std::fs::rename(&new, d.path().join("old")).unwrap();
    std::fs::create_dir(&new).unwrap();
    std::fs::write(new.join(n(30, 3)), "x").unwrap();
    let a = ix.answer(&new).unwrap();
    assert_eq!(names(&a), [n(30, 3)]);
}

#[test]
fn a_parent_moved_away_raises_no_event_and_is_still_noticed() {
    let d = tempfile::tempdir().unwrap();
    let inbox = d.path().join("inbox");
    let new = inbox.join("new");
    std::fs::create_dir_all(&new).unwrap();
    let n = |p: u32, s: u32| format!("{p}_20260615T140531Z_{s:06}_from_a_to_b.handoff");
    std::fs::write(new.join(n(50, 2)), "x").unwrap();
    let mut ix = Ix::new();
    assert_eq!(names(&ix.answer(&new).unwrap()), [n(50, 2)]);
    // The inbox moved aside and restored from a copy holding one more:
    // the watched folder itself saw nothing.
    std::fs::rename(&inbox, d.path().join("inbox.old")).unwrap();
    std::fs::create_dir_all(&new).unwrap();
    std::fs::write(new.join(n(50, 2)), "x").unwrap();
    std::fs::write(new.join(n(10, 1)), "x").unwrap();
    assert_eq!(names(&ix.answer(&new).unwrap()), [n(10, 1), n(50, 2)]);
}

/// An empty folder `new` in a temporary directory.
fn folder() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let new = d.path().join("new");
    std::fs::create_dir(&new).unwrap();
    (d, new)
}

/// Names as queues hold them: built by the daemon (widths 6 to 8, seq 0,
/// several senders and recipients), moved in under a collision prefix,
/// and of no known shape.
const NAMES: &[&str] = &[
    "50_20260615T140531Z_000001_from_a_to_b.handoff",
    "50_20260615T140531Z_000001_from_a-2_to_b.handoff",
    "50_20260615T140531Z_0000001_from_a_to_b.handoff",
    "50_20260615T140531Z_00000001_from_a_to_b.handoff",
    "50_20260615T140531Z_000000_from_a_to_b.handoff",
    "50_20260615T140531Z_0000000_from_a_to_b.handoff",
    "50_20260615T140531Z_999999_from_a_to_b_c.handoff",
    "50_20260615T140531Z_1000000_from_a_to_b.handoff",
    "50_20260615T140530Z_000002_from_z_to_b.handoff",
    "50_19991231T235959Z_000002_from_z_to_b.handoff",
    "10_20260615T140531Z_000003_from_a_to_b_and_4_more.handoff",
    "99_20260615T140531Z_000003_from_a_to_b.handoff",
    "2026-06-15T14:05:31.123456Z_50_20260615T140531Z_000001_from_a_to_b.handoff",
    "2026-06-15T14:05:31.123456Z_2_50_20260615T140531Z_000001_from_a_to_b.handoff",
    "50_2026615T1405310Z_000001_from_a_to_b.handoff",
    "50_bad.handoff",
    "5_x.handoff",
    "50.handoff",
    "ab_20260615T140531Z_000001_from_a_to_b.handoff",
    "50_20260615T140531Z_000001_from_a_to.handoff",
];

/// The hand-out order, as the helpers sort a listing.
fn grammar_order(names: &[String]) -> Vec<String> {
    let mut v = names.to_vec();
    crate::protocol::grammar::sort_names(&mut v);
    v
}

fn assert_names_keep_text_and_order(names: &[String]) {
    let mut tails = name::Tails::default();
    let mut packed: Vec<name::Name> = names
        .iter()
        .map(|n| name::Name::intern(n, &mut tails))
        .collect();
    for (n, text) in packed.iter().zip(names) {
        assert_eq!(n.text(), text.as_str());
        assert_eq!(name::Name::find(text, &tails).as_ref(), Some(n));
    }
    packed.sort();
    let texts: Vec<String> = packed.iter().map(|n| n.to_string()).collect();
    assert_eq!(texts, grammar_order(names));
}

#[test]
fn compact_names_keep_the_text_and_the_hand_out_order() {
    let names: Vec<String> = NAMES.iter().map(|s| s.to_string()).collect();
    assert_names_keep_text_and_order(&names);
    assert_eq!(std::mem::size_of::<name::Name>(), 24);
}

use proptest::strategy::Strategy;

proptest::proptest! {
    #[test]
    fn compact_names_order_as_the_grammar_for_any_names(
        names in proptest::collection::vec(
            proptest::prop_oneof![
                (
                    "[0-9]{2}",
                    "(19|20)[0-9]{2}(0[1-9]|1[0-2])(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3])[0-5][0-9][0-5][0-9]Z",
                    "[0-9]{6,9}",
                    "(a|b|a-1|Zed)",
                    "(b|c|b_c|b_and_3_more)",
                )
                    .prop_map(|(p, t, s, f, r)| format!("{p}_{t}_{s}_from_{f}_to_{r}.handoff")),
                "[0-9A-Za-z_:.-]{1,40}\\.handoff",
            ],
            1..40,
        )
    ) {
        let mut names = names;
        names.sort();
        names.dedup();
        assert_names_keep_text_and_order(&names);
    }
}

#[test]
fn a_listing_holds_one_tail_per_sender_and_recipients_and_hands_out_in_order() {
    let (_d, new) = folder();
    // Every name in NAMES is an item's (`grammar::valid_handoff_name`).
    let mut listed: Vec<String> = NAMES.iter().map(|s| s.to_string()).collect();
    for s in 100..400 {
        for from in ["a", "b"] {
            listed.push(format!(
                "50_20260615T140531Z_{s:06}_from_{from}_to_r.handoff"
            ));
        }
    }
    for n in &listed {
        std::fs::write(new.join(n), "x").unwrap();
    }
    let mut ix = Ix::new();
    let a = ix.answer(&new).unwrap();
    assert_eq!(a.head, grammar_order(&listed)[..order::HEAD]);
    let e = &ix.index.folders[&new].entries;
    assert_eq!(e.items.len(), listed.len());
    let all: Vec<String> = e.items.keys().map(|n| n.to_string()).collect();
    assert_eq!(all, grammar_order(&listed));
    // Two senders' 600 items share two tails; the names of other shapes
    // in NAMES add theirs (fewer than they are).
    assert!(e.tails.len() < 2 + NAMES.len(), "{}", e.tails.len());
}

/// Reads and drops every event queued: the changes made before it raised
/// none, as far as the index can tell.
fn lose_events(ix: &mut Ix) {
    let mut buf = [0u8; 4096];
    while rustix::io::read(&ix.index.inotify, &mut buf).is_ok_and(|n| n > 0) {}
}

#[test]
fn an_idle_folder_is_not_listed_again_and_a_change_no_event_told_is() {
    let (_d, new) = folder();
    let n = |s: u32| format!("50_20260615T140531Z_{s:06}_from_a_to_b.handoff");
    for s in 2..=5 {
        std::fs::write(new.join(n(s)), "x").unwrap();
    }
    let mut ix = Ix::new();
    assert_eq!(ix.answer(&new).unwrap().items, 4);
    // Nothing changed: no listing, however often it is checked.
    for _ in 0..3 {
        ix.index.relist_unaccounted();
        assert!(ix.jobs.try_recv().is_err(), "listed again with no change");
    }
    // A change its events tell: applied, and no listing either.
    std::fs::remove_file(new.join(n(5))).unwrap();
    ix.index.relist_unaccounted();
    assert!(ix.jobs.try_recv().is_err(), "listed again after an event");
    assert_eq!(ix.answer(&new).unwrap().items, 3);
    // A change that raised no event: the folder's times moved past what
    // its events account for (set, so the check does not depend on the
    // clock's grain), and the next check lists it again.
    std::fs::write(new.join(n(1)), "x").unwrap();
    lose_events(&mut ix);
    std::fs::File::open(&new)
        .unwrap()
        .set_modified(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(3600))
        .unwrap();
    assert_eq!(ix.answer(&new).unwrap().items, 3, "the event was lost");
    ix.index.relist_unaccounted();
    ix.list();
    let a = ix.answer(&new).unwrap();
    assert_eq!(names(&a), [n(1), n(2), n(3), n(4)]);
    // And once listed, quiet again.
    ix.index.relist_unaccounted();
    assert!(ix.jobs.try_recv().is_err(), "listed again with no change");
}
