//! What a turn's take-in costs against one `fsx::publish` (the doc on
//! `mod cost` in objects/mod.rs says how to run it).

use super::*;

#[test]
#[ignore]
fn take_in_cost_against_a_publish() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("p");
    std::fs::create_dir_all(&root).unwrap();
    let init = std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["init", "-q"])
        .status()
        .unwrap();
    assert!(init.success());
    let project = Project::new(&root);
    for i in 0..10 {
        let q = project.object_quarantine(&format!("r{i}"));
        fsx::ensure_dirs(&[q.join("pack"), q.join("info")]).unwrap();
    }
    let mut q = Quarantines::new(&project).unwrap();
    let (turns, files) = (20_000u32, 200u32);
    let t = std::time::Instant::now();
    for _ in 0..turns {
        q.take_in();
    }
    let take = t.elapsed() / turns;
    let t = std::time::Instant::now();
    for i in 0..files {
        fsx::publish(&root, &root.join(format!("f{i}")), b"x").unwrap();
    }
    let publish = t.elapsed() / files;
    eprintln!(
        "take-in of 10 empty quarantines: {take:?} a turn; one fsx::publish: {publish:?}; a publish costs {:.1} take-ins",
        publish.as_secs_f64() / take.as_secs_f64()
    );
}
