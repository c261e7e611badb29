//! The take-in against a real repository: what reaches the store, what is
//! kept aside, and a quarantine found quiet that changes again.

use super::*;
use std::process::{Command, Stdio};

fn git(dir: &Path, args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let mut c = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input).unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn loose(repo: &Path, id: &str) -> PathBuf {
    repo.join(".git/objects").join(&id[..2]).join(&id[2..])
}

/// A project and a scratch repository (where objects are made), with the
/// object quarantine of role `r`.
struct Scene {
    _dir: tempfile::TempDir,
    root: PathBuf,
    scratch: PathBuf,
    project: Project,
    q: PathBuf,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let (root, scratch) = (dir.path().join("p"), dir.path().join("s"));
        for r in [&root, &scratch] {
            std::fs::create_dir_all(r).unwrap();
            git(r, &["init", "-q"], b"");
        }
        let project = Project::new(&root);
        let q = project.object_quarantine("r");
        std::fs::create_dir_all(q.join("pack")).unwrap();
        Scene {
            _dir: dir,
            root,
            scratch,
            project,
            q,
        }
    }

    /// The id of `content` as a blob, written into the scratch repository.
    fn object(&self, content: &[u8]) -> String {
        git(&self.scratch, &["hash-object", "-w", "--stdin"], content)
    }

    /// The id `content` would have, nothing written.
    fn id_of(&self, content: &[u8]) -> String {
        git(&self.scratch, &["hash-object", "--stdin"], content)
    }

    /// The scratch repository's loose object `from` put into the
    /// quarantine under the name `id`.
    fn put(&self, id: &str, from: &str) {
        std::fs::create_dir_all(self.q.join(&id[..2])).unwrap();
        std::fs::copy(
            loose(&self.scratch, from),
            self.q.join(&id[..2]).join(&id[2..]),
        )
        .unwrap();
    }

    /// The object `id` packed into the quarantine's `pack/`.
    fn pack(&self, id: &str) {
        let base = self.q.join("pack/pack");
        git(
            &self.scratch,
            &["pack-objects", "-q", base.to_str().unwrap()],
            format!("{id}\n").as_bytes(),
        );
    }

    /// Whether the project's store has `id`.
    fn has(&self, id: &str) -> bool {
        Command::new("git")
            .arg("-C")
            .arg(&self.root)
            .args(["cat-file", "-e", id])
            .status()
            .unwrap()
            .success()
    }

    /// The quarantine's folders last changed a while ago.
    fn set_back(&self) {
        for p in [self.q.clone(), self.q.join("pack")] {
            let f = std::fs::File::open(p).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(5))
                .unwrap();
        }
    }
}

/// A quarantine holding a good loose object, one under another's name,
/// a good pack and a broken one: the good ones reach the store, the
/// others are kept aside, and the quarantine is left empty.
#[test]
fn only_objects_whose_content_is_their_name_reach_the_store() {
    let s = Scene::new();
    let (project, q) = (&s.project, &s.q);
    let good = s.object(b"good\n");
    s.put(&good, &good);
    let evil = s.object(b"evil\n");
    let named = s.id_of(b"reviewed\n");
    s.put(&named, &evil);
    let packed = s.object(b"packed\n");
    s.pack(&packed);
    std::fs::write(q.join("pack/pack-dead.pack"), b"PACK garbage").unwrap();
    std::fs::write(q.join("pack/pack-dead.idx"), b"").unwrap();

    let before = waiting(&project.quarantine_dir());
    assert_eq!(before.len(), 1);
    assert_eq!((before[0].0.as_str(), before[0].1), ("r", 4));

    let mut quarantines = Quarantines::new(project).unwrap();
    let taken = quarantines.take_in();
    assert_eq!(
        taken,
        Taken {
            objects: 2,
            refused: 2,
            more: false
        }
    );
    assert!(s.has(&good) && s.has(&packed));
    assert!(!s.has(&named) && !s.has(&evil));
    assert!(waiting(&project.quarantine_dir()).is_empty());
    let mut refused = HeldDir::open(&project.refused_objects_dir())
        .unwrap()
        .names()
        .unwrap();
    refused.sort();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused
        .iter()
        .any(|n| refused_parts(n) == Some(("r", named.as_str()))));
    assert!(refused
        .iter()
        .any(|n| refused_parts(n) == Some(("r", "pack-dead"))));
    // A second turn finds nothing to do.
    assert_eq!(quarantines.take_in(), Taken::default());
}

/// Found empty a while after its last change, the quarantine is not
/// listed again; an object git writes later (in a new fan-out folder, or
/// as a pack) is still taken in at the next turn.
#[test]
fn a_quiet_quarantine_still_takes_in_what_git_writes_later() {
    let s = Scene::new();
    let q = &s.q;
    let good = s.object(b"good\n");
    s.put(&good, &good);
    let mut quarantines = Quarantines::new(&s.project).unwrap();
    assert_eq!(quarantines.take_in().objects, 1);
    assert_eq!(quarantines.take_in(), Taken::default());

    for xx in HeldDir::open(q).unwrap().names().unwrap() {
        if is_fan(&xx) {
            std::fs::remove_dir(q.join(xx)).unwrap();
        }
    }
    s.set_back();
    assert_eq!(quarantines.take_in(), Taken::default());
    assert!(quarantines.quiet.contains_key("r"));
    let later = s.object(b"later\n");
    s.put(&later, &later);
    assert_eq!(quarantines.take_in().objects, 1);
    assert!(s.has(&later));
    s.set_back();
    assert_eq!(quarantines.take_in(), Taken::default());
    let more = s.object(b"packed later\n");
    s.pack(&more);
    assert_eq!(quarantines.take_in().objects, 1);
    assert!(s.has(&more));
}
