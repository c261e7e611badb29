//! Words for `sh`: the launcher's wrappers, the sandbox's command lines,
//! the watchdog's restart line and the git hooks the swarm writes all quote
//! through here, so there is one rule.
//! Every word is single-quoted, even a plain one: the text is then the same
//! for every input and a reader sees at once what is one word.

use std::path::Path;

/// POSIX shell single-quoting: `'` becomes `'"'"'`.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

/// [`quote`] for a path (lossy for a name that is not UTF-8).
pub fn quote_path(p: &Path) -> String {
    quote(&p.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quote_in_a_word_survives_the_shell() {
        assert_eq!(quote("it's"), "'it'\"'\"'s'");
        assert_eq!(quote(""), "''");
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf %s {}", quote("a'b $c \\d"))])
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"a'b $c \\d");
    }
}
