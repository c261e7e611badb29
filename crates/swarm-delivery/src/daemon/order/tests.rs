use super::heads::heads;
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
