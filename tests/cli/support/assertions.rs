//! Reading and asserting on the file tree and on handoff files.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Names directly in a folder (files and folders), sorted; empty when missing.
pub fn entries(dir: &Path) -> Vec<String> {
    list(dir, |_| true)
}

/// Regular files directly in a folder, sorted by name.
pub fn files(dir: &Path) -> Vec<String> {
    list(dir, |e| e.file_type().is_ok_and(|t| t.is_file()))
}

/// `*.handoff` names directly in a folder, sorted.
pub fn handoff_names(dir: &Path) -> Vec<String> {
    list(dir, |e| {
        e.file_name().to_string_lossy().ends_with(".handoff")
    })
}

fn list(dir: &Path, keep: impl Fn(&fs::DirEntry) -> bool) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| keep(e))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every file below `dir`, recursively, sorted.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out.sort();
    out
}

/// Every `*.handoff` a recipient holds below its inbox (`new`, `in_process`,
/// `completed`, batch folders included).
pub fn inbox_copies(wt: &Path) -> Vec<PathBuf> {
    ["inbox/new", "inbox/in_process", "inbox/completed"]
        .iter()
        .flat_map(|d| walk(&super::hq(wt, d)))
        .filter(|f| f.to_string_lossy().ends_with(".handoff"))
        .collect()
}

/// The copies of the file `name` a recipient holds (see [`inbox_copies`]).
pub fn copies_of(wt: &Path, name: &str) -> Vec<PathBuf> {
    inbox_copies(wt)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == name))
        .collect()
}

/// Every path under `dir` with its content (folders map to `None`): two
/// equal snapshots mean nothing was created, removed or written.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            if e.file_type().unwrap().is_dir() {
                out.insert(path.clone(), None);
                stack.push(path);
            } else {
                out.insert(path.clone(), Some(fs::read(&path).unwrap()));
            }
        }
    }
    out
}

/// The values of header `name` in a handoff's text (headers end at the
/// first blank line).
pub fn header_values(text: &str, name: &str) -> Vec<String> {
    let prefix = format!("{name}: ");
    text.lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(str::to_string)
        .collect()
}

/// The first value of header `name` in a handoff's text.
pub fn header<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let prefix = format!("{name}: ");
    text.lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix(prefix.as_str()))
}

/// The first value of header `name` in a handoff file.
pub fn file_header(path: &Path, name: &str) -> Option<String> {
    let text = fs::read_to_string(path).unwrap();
    header(&text, name).map(str::to_string)
}

/// How often header `name` occurs in a handoff file.
pub fn header_count(path: &Path, name: &str) -> usize {
    header_values(&fs::read_to_string(path).unwrap(), name).len()
}

pub fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// Asserts a file left its folder (moved or removed).
#[track_caller]
pub fn assert_gone(path: &Path) {
    assert!(!path.exists(), "{} is still there", path.display());
}

/// Asserts `from` moved to `to`: gone from its folder, present in the other.
#[track_caller]
pub fn assert_moved(from: &Path, to: &Path) {
    assert_gone(from);
    assert!(to.exists(), "{} is missing", to.display());
}

/// Asserts a folder holds exactly `n` entries (files or folders); returns them.
#[track_caller]
pub fn assert_count(dir: &Path, n: usize) -> Vec<String> {
    let names = entries(dir);
    assert_eq!(names.len(), n, "entries of {}: {names:?}", dir.display());
    names
}

/// The findings with `code` in a `swarm doctor --json` report.
pub fn doctor_findings(report: &serde_json::Value, code: &str) -> Vec<serde_json::Value> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().clone())
        .filter(|f| f["code"] == code)
        .collect()
}

/// Their messages.
pub fn doctor_messages(report: &serde_json::Value, code: &str) -> Vec<String> {
    doctor_findings(report, code)
        .iter()
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect()
}

/// `swarm doctor` at `root` reports the git object `id` as refused
/// (daemon/objects/) and no objects left waiting: handoffd took every
/// other object the agents wrote into the store.
pub fn doctor_reports_refused_object(g: &super::Project, root: &Path, id: &str) {
    let doctor = g.cmd("swarm").at(root).args(["doctor", "--json"]).run();
    assert!(
        doctor.stdout.contains("GIT_OBJECT_REFUSED") && doctor.stdout.contains(id),
        "{}",
        doctor.stdout
    );
    assert!(
        !doctor.stdout.contains("GIT_OBJECTS_WAITING"),
        "{}",
        doctor.stdout
    );
}
