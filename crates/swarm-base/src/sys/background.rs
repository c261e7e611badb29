//! Work a daemon does for later, never for a caller waiting now: catching
//! up after a start (the head reads of a deep inbox, the search index's
//! refresh of every file that arrived while it was down) is bounded, but on
//! two cores it would compete with the `ready-next` that is waiting for an
//! answer. Such threads lower their own CPU priority to the lowest (nice
//! 19): they still run whenever a core is free, and yield when one is not.

/// Lowers the calling thread's CPU priority to the lowest. Best effort: a
/// thread left at the process's priority still does its work.
pub fn lowest_priority() {
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19);
}
