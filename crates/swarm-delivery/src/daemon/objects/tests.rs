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

/// A quarantine holding a good loose object, one under another's name,
/// a good pack and a broken one: the good ones reach the store, the
/// others are kept aside, and the quarantine is left empty.
#[test]
fn only_objects_whose_content_is_their_name_reach_the_store() {
    let d = tempfile::tempdir().unwrap();
    let (root, scratch) = (d.path().join("p"), d.path().join("s"));
    for r in [&root, &scratch] {
        std::fs::create_dir_all(r).unwrap();
        git(r, &["init", "-q"], b"");
    }
    let project = Project::new(&root);
    let q = project.object_quarantine("r");
    std::fs::create_dir_all(q.join("pack")).unwrap();
    let put = |id: &str, from: &Path| {
        std::fs::create_dir_all(q.join(&id[..2])).unwrap();
        std::fs::copy(from, q.join(&id[..2]).join(&id[2..])).unwrap();
    };
    let good = git(&scratch, &["hash-object", "-w", "--stdin"], b"good\n");
    put(&good, &loose(&scratch, &good));
    let evil = git(&scratch, &["hash-object", "-w", "--stdin"], b"evil\n");
    let named = git(&scratch, &["hash-object", "--stdin"], b"reviewed\n");
    put(&named, &loose(&scratch, &evil));
    let packed = git(&scratch, &["hash-object", "-w", "--stdin"], b"packed\n");
    let base = q.join("pack/pack");
    git(
        &scratch,
        &["pack-objects", "-q", base.to_str().unwrap()],
        format!("{packed}\n").as_bytes(),
    );
    std::fs::write(q.join("pack/pack-dead.pack"), b"PACK garbage").unwrap();
    std::fs::write(q.join("pack/pack-dead.idx"), b"").unwrap();

    let before = waiting(&project.quarantine_dir());
    assert_eq!(before.len(), 1);
    assert_eq!((before[0].0.as_str(), before[0].1), ("r", 4));

    let mut quarantines = Quarantines::new(&project).unwrap();
    let taken = quarantines.take_in();
    assert_eq!(
        taken,
        Taken {
            objects: 2,
            refused: 2,
            more: false
        }
    );
    let has = |id: &str| {
        Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["cat-file", "-e", id])
            .status()
            .unwrap()
            .success()
    };
    assert!(has(&good) && has(&packed));
    assert!(!has(&named) && !has(&evil));
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

    // Found empty a while after its last change, the quarantine is not
    // listed again; an object git writes later (in a new fan-out
    // folder, or as a pack) is still taken in at the next turn.
    let back = |p: &Path| {
        let f = std::fs::File::open(p).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(5))
            .unwrap();
    };
    for xx in HeldDir::open(&q).unwrap().names().unwrap() {
        if is_fan(&xx) {
            std::fs::remove_dir(q.join(xx)).unwrap();
        }
    }
    back(&q);
    back(&q.join("pack"));
    assert_eq!(quarantines.take_in(), Taken::default());
    assert!(quarantines.quiet.contains_key("r"));
    let later = git(&scratch, &["hash-object", "-w", "--stdin"], b"later\n");
    put(&later, &loose(&scratch, &later));
    assert_eq!(quarantines.take_in().objects, 1);
    assert!(has(&later));
    back(&q);
    back(&q.join("pack"));
    assert_eq!(quarantines.take_in(), Taken::default());
    let more = git(
        &scratch,
        &["hash-object", "-w", "--stdin"],
        b"packed later\n",
    );
    git(
        &scratch,
        &["pack-objects", "-q", base.to_str().unwrap()],
        format!("{more}\n").as_bytes(),
    );
    assert_eq!(quarantines.take_in().objects, 1);
    assert!(has(&more));
}
