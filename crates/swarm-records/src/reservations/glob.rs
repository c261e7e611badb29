//! The globs a reservation names: paths relative to the repository's top
//! (the same in every role's worktree), with `*` and `?` inside one path
//! segment and `**` for any number of segments. Normalised when reserved
//! (`.` and `..` resolved, the caller's subfolder prefixed), and refused when
//! they would leave the worktree. Matched by globset (a maintained crate),
//! configured to these rules ([`Pattern`]).

use std::path::Path;

/// Why a glob is refused, in words for the person or agent who typed it
/// (`glob '<glob>': ...`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadGlob(pub String);

/// Longest glob accepted, in bytes.
pub const MAX_GLOB_BYTES: usize = 1024;

/// `glob` as typed in folder `sub` of the worktree (`""` at its top): the
/// repository-relative glob, or why it is refused.
pub fn normalise(glob: &str, worktree: &Path, cwd: &Path) -> Result<String, BadGlob> {
    let shown = crate::text::escape(glob);
    if glob.is_empty() || glob.len() > MAX_GLOB_BYTES {
        return Err(BadGlob(format!(
            "glob '{shown}': empty or longer than {MAX_GLOB_BYTES} bytes"
        )));
    }
    if glob.chars().any(char::is_control) || glob.contains('\\') {
        return Err(BadGlob(format!(
            "glob '{shown}': control characters and backslashes are not allowed"
        )));
    }
    if glob.contains(['[', ']', '{', '}']) {
        return Err(BadGlob(format!(
            "glob '{shown}': only *, ? and ** are understood (no [..] or {{..}}); name each pattern"
        )));
    }
    let (base, rest): (Vec<String>, &str) = if let Some(abs) = glob.strip_prefix('/') {
        (Vec::new(), abs)
    } else {
        let sub = cwd.strip_prefix(worktree).map_err(|_| {
            BadGlob(format!(
                "{} is not inside the worktree {}",
                cwd.display(),
                worktree.display()
            ))
        })?;
        (
            sub.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect(),
            glob,
        )
    };
    let mut parts = base;
    if glob.starts_with('/') {
        // An absolute glob must name a place inside the worktree.
        let wt: Vec<String> = worktree
            .components()
            .skip(1)
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        if segs.len() < wt.len() || segs[..wt.len()].iter().zip(&wt).any(|(a, b)| a != b) {
            return Err(BadGlob(format!(
                "glob '{shown}' escapes the project: an absolute glob must lie inside {}",
                worktree.display()
            )));
        }
        return normalise(&segs[wt.len()..].join("/"), worktree, worktree);
    }
    for seg in rest.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(BadGlob(format!(
                        "glob '{shown}' escapes the project (its `..` leaves {})",
                        worktree.display()
                    )));
                }
            }
            s if s.contains("**") && s != "**" => {
                return Err(BadGlob(format!(
                    "glob '{shown}': `**` must be a whole path segment"
                )))
            }
            s => parts.push(s.to_string()),
        }
    }
    if parts.is_empty() {
        return Ok("**".to_string());
    }
    if parts.iter().any(|p| p == ".git") {
        return Err(BadGlob(format!(
            "glob '{shown}': .git is not a file of the project"
        )));
    }
    Ok(parts.join("/"))
}

/// Every glob typed in `cwd` for `worktree` (both canonicalised; a `cwd`
/// outside the worktree counts as its top), normalised.
pub fn normalise_all<S: AsRef<str>>(
    typed: &[S],
    worktree: &Path,
    cwd: &Path,
) -> Result<Vec<String>, BadGlob> {
    let wt = worktree
        .canonicalize()
        .unwrap_or_else(|_| worktree.to_path_buf());
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    let cwd = if cwd.starts_with(&wt) {
        cwd
    } else {
        wt.clone()
    };
    typed
        .iter()
        .map(|g| normalise(g.as_ref(), &wt, &cwd))
        .collect()
}

/// A glob compiled once for matching many paths, by globset configured to
/// what the docs promise (docs/reservations.md, "Globs"): `*` and `?` stay
/// inside one segment (`literal_separator`), `**` is any number of whole
/// segments, case matters, and `\` escapes nothing. globset matches in
/// linear time (regex automata), so no hostile glob can make it explode.
///
/// One configuration globset has no switch for: its `a/**` does not match
/// `a` itself, but "any number of segments" includes none, so a
/// reservation of `src/**` also covers a file named `src`; the pattern is
/// then matched as `src` too.
pub struct Pattern(globset::GlobSet);

impl Pattern {
    pub fn new(glob: &str) -> Pattern {
        let mut set = globset::GlobSetBuilder::new();
        let mut bare = glob;
        while let Some(shorter) = bare.strip_suffix("/**") {
            bare = shorter;
        }
        for g in [glob, bare] {
            // A glob that is not one (`[` without `]`; `normalise` refuses
            // both) names itself.
            let compiled = globset::GlobBuilder::new(g)
                .literal_separator(true)
                .backslash_escape(false)
                .build()
                .or_else(|_| globset::Glob::new(&globset::escape(g)));
            if let Ok(c) = compiled {
                set.add(c);
            }
        }
        Pattern(set.build().unwrap_or_else(|_| globset::GlobSet::empty()))
    }

    /// Whether `path` (repository-relative, `/`-separated) matches.
    pub fn matches(&self, path: &str) -> bool {
        self.0.is_match(path)
    }
}

/// Whether a glob has no wildcard (names one path).
pub fn is_literal(glob: &str) -> bool {
    !glob.contains(['*', '?'])
}

/// Whether two globs may name one file: equal, one matching the other's
/// literal path, or both matching one of `files`.
pub fn overlap(a: &str, b: &str, files: &[String]) -> bool {
    if a == b {
        return true;
    }
    let (pa, pb) = (Pattern::new(a), Pattern::new(b));
    (is_literal(b) && pa.matches(b))
        || (is_literal(a) && pb.matches(a))
        || files.iter().any(|f| pa.matches(f) && pb.matches(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(glob: &str, path: &str) -> bool {
        Pattern::new(glob).matches(path)
    }

    /// The edge cases where a glob crate may differ from what the docs
    /// promise, pinned (globset's defaults get the first two wrong).
    #[test]
    fn stars_stay_in_a_segment_and_double_stars_may_be_empty() {
        // `*` and `?` do not cross `/` (globset's default lets them).
        assert!(!matches("*", "a/b"));
        assert!(!matches("a*", "a/b"));
        assert!(!matches("a?b", "a/b"));
        assert!(matches("*", ".hidden"));
        assert!(matches("a*", "a"));
        // `**` is any number of segments, none included: `src/**` covers
        // a file named `src` (globset's `src/**` alone does not).
        assert!(matches("src/**", "src"));
        assert!(matches("src/**", "src/a"));
        assert!(!matches("src/**", "srcx"));
        assert!(!matches("src/**", "lib/src/a"));
        assert!(matches("**/a.rs", "a.rs"));
        assert!(matches("**/a.rs", "x/y/a.rs"));
        assert!(matches("a/**/b", "a/b"));
        assert!(matches("a/**/b", "a/x/y/b"));
        assert!(!matches("a/**/b", "a/xb"));
        assert!(matches("**", "a/b/c"));
        // Case matters; `?` is one byte (as the old matcher had it), never
        // none.
        assert!(!matches("SRC/*", "src/a"));
        assert!(!matches("a?c", "aéc"));
        assert!(matches("a??c", "aéc"));
        assert!(!matches("a?c", "ac"));
        // `\` escapes nothing (and `normalise` refuses it): it names itself.
        assert!(!matches("a\\*", "a*"));
        assert!(matches("a\\*", "a\\b"));
        // What `normalise` refuses cannot compile into something wider: an
        // unclosed class names itself.
        assert!(matches("a[b", "a[b"));
        assert!(!matches("a[b", "ab"));
    }

    /// A hostile glob (every segment stars) is matched in linear time.
    #[test]
    fn a_glob_of_many_stars_does_not_explode() {
        let g = "*a".repeat(MAX_GLOB_BYTES / 2);
        let path = "a".repeat(4096);
        assert!(matches(&g, &path));
        assert!(!matches(&g, &format!("{path}b")));
    }

    #[test]
    fn globs_match_within_and_across_segments() {
        assert!(matches("src/*.rs", "src/a.rs"));
        assert!(!matches("src/*.rs", "src/x/a.rs"));
        assert!(matches("src/**", "src/x/a.rs"));
        assert!(matches("src/**/*.rs", "src/a.rs"));
        assert!(matches("**", "a/b"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
    }

    #[test]
    fn normalising_resolves_dots_and_refuses_escapes() {
        let wt = Path::new("/p/wt");
        assert_eq!(normalise("./a/../b/*.rs", wt, wt).unwrap(), "b/*.rs");
        assert_eq!(
            normalise("x.rs", wt, Path::new("/p/wt/src")).unwrap(),
            "src/x.rs"
        );
        assert_eq!(normalise("/p/wt/src/**", wt, wt).unwrap(), "src/**");
        assert!(normalise("../x", wt, wt)
            .unwrap_err()
            .0
            .contains("escapes the project"));
        assert!(normalise("/etc/passwd", wt, wt)
            .unwrap_err()
            .0
            .contains("escapes the project"));
        assert!(normalise("src/../../x", wt, wt).is_err());
        assert!(normalise("a/[ab]", wt, wt).is_err());
        assert!(normalise(".git/hooks/*", wt, wt).is_err());
    }
}
