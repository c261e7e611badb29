//! Giving freed memory back to the system. A daemon that builds a large
//! structure once (an index of 100 000 waiting items, built from a sorted
//! listing) frees the listing's scratch afterwards, but the C allocator
//! keeps freed pages resident inside its arenas: handoffd held 3.5 MB more
//! than it used that way (issue 47). Called after such a build, never on a
//! caller's path.

/// Returns the free pages of every allocator arena to the system (glibc's
/// `malloc_trim`); nothing elsewhere. Costs a walk of the free chunks.
pub fn release_free() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free;
    // it touches nothing a caller owns.
    unsafe {
        libc::malloc_trim(0);
    }
}
