//! Why a failed original failed: its `.error` note, looked up in both
//! places a daemon writes it, read bounded (a reason is one line).

use std::collections::HashSet;
use std::path::Path;

use crate::fsx;
use crate::protocol::grammar;

use super::MAX_NOTE_BYTES;

/// The failure reason of a failed original at `path`, looked up in both places
/// a daemon writes it (see `failure_note`).
pub fn failure_reason(path: &Path) -> Option<String> {
    let dir = path.parent()?;
    let name = path.file_name()?.to_string_lossy().into_owned();
    let outbox = dir.parent()?.join("outbox");
    let notes_in = |d: &Path| -> HashSet<String> {
        [name.as_str(), grammar::strip_collision_prefix(&name)]
            .iter()
            .map(|n| format!("{n}.error"))
            .filter(|n| d.join(n).is_file())
            .collect()
    };
    failure_note(dir, &name, &notes_in(dir), &notes_in(&outbox))
}

/// The reason a failed original carries: `<name>.error` beside it in `failed/`
/// (this daemon), else in the outbox it came from (SwarmForge's daemon),
/// where the name has no collision prefix.
pub(super) fn failure_note(
    failed_dir: &Path,
    name: &str,
    failed_notes: &HashSet<String>,
    outbox_notes: &HashSet<String>,
) -> Option<String> {
    let plain = grammar::strip_collision_prefix(name);
    let outbox = failed_dir.parent()?.join("outbox");
    for (set, dir, n) in [
        (failed_notes, failed_dir.to_path_buf(), name),
        (failed_notes, failed_dir.to_path_buf(), plain),
        (outbox_notes, outbox.clone(), name),
        (outbox_notes, outbox, plain),
    ] {
        let note = format!("{n}.error");
        if set.contains(&note) {
            if let Some(r) = read_note(&dir.join(note)) {
                return Some(r);
            }
        }
    }
    None
}

pub(super) fn read_note(path: &Path) -> Option<String> {
    let bytes = fsx::read_bounded(path, MAX_NOTE_BYTES).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim_end().to_string())
}
