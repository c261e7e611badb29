//! The one EDN shape this project writes: a flat map of keywords to strings
//! and whole numbers, `{:attempt 3 :last-error "…" :next-at "…"}`. Today's
//! SwarmForge keeps its daemon's retry state in `.edn` files (its
//! `<handoff>.retry.edn` sidecars, docs/swarmforge-compat.md §6); a reader
//! of those files (a person, `bb`, a dashboard) reads ours. And one more:
//! a flat vector of strings, `["a" "b"]`, which upstream writes into a
//! header (`batch_task_ids`, docs/swarmforge-compat.md §4). Anything else
//! (nesting, symbols, a map in a vector) is refused by the reader, never
//! guessed at.

use std::collections::BTreeMap;

/// A value of the flat map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Int(u64),
    Str(String),
}

/// Keys are written in the order given (the file reads as its writer meant).
pub fn render(pairs: &[(&str, Value)]) -> String {
    let mut s = String::from("{");
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            s.push_str("\n ");
        }
        s.push(':');
        s.push_str(k);
        s.push(' ');
        match v {
            Value::Int(n) => s.push_str(&n.to_string()),
            Value::Str(t) => write_str(&mut s, t),
        }
    }
    s.push_str("}\n");
    s
}

/// A string literal, escaped as EDN reads it back.
fn write_str(s: &mut String, t: &str) {
    s.push('"');
    for c in t.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            // Other control characters never reach the file.
            c if c.is_control() => s.push(' '),
            c => s.push(c),
        }
    }
    s.push('"');
}

/// The rest of a string literal whose opening quote was read.
fn read_str(it: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<String> {
    let mut s = String::new();
    loop {
        match it.next()? {
            '"' => return Some(s),
            '\\' => match it.next()? {
                'n' => s.push('\n'),
                'r' => s.push('\r'),
                't' => s.push('\t'),
                c => s.push(c),
            },
            c => s.push(c),
        }
    }
}

/// A flat vector of strings on one line: `["a" "b"]`.
pub fn render_strings<S: AsRef<str>>(items: &[S]) -> String {
    let mut s = String::from("[");
    for (i, t) in items.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        write_str(&mut s, t.as_ref());
    }
    s.push(']');
    s
}

/// Parses a flat vector of strings (commas are whitespace in EDN); `None`
/// for anything else, as upstream's reader treats it.
pub fn parse_strings(text: &str) -> Option<Vec<String>> {
    let mut it = text.trim().chars().peekable();
    if it.next()? != '[' {
        return None;
    }
    let mut out = Vec::new();
    loop {
        while it.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            it.next();
        }
        match it.next()? {
            ']' => break,
            '"' => out.push(read_str(&mut it)?),
            _ => return None,
        }
    }
    it.all(char::is_whitespace).then_some(out)
}

/// Parses a flat map; `None` for anything else (the caller treats the file
/// as unreadable and says so, or rebuilds it).
pub fn parse(text: &str) -> Option<BTreeMap<String, Value>> {
    let mut it = text.trim().chars().peekable();
    if it.next()? != '{' {
        return None;
    }
    let mut out = BTreeMap::new();
    loop {
        while it.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            it.next();
        }
        match it.next()? {
            '}' => break,
            ':' => {}
            _ => return None,
        }
        let mut key = String::new();
        while let Some(&c) = it.peek() {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '?' {
                key.push(c);
                it.next();
            } else {
                break;
            }
        }
        if key.is_empty() {
            return None;
        }
        while it.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            it.next();
        }
        let value = match it.peek()? {
            '"' => {
                it.next();
                Value::Str(read_str(&mut it)?)
            }
            c if c.is_ascii_digit() => {
                let mut n: u64 = 0;
                while let Some(d) = it.peek().and_then(|c| c.to_digit(10)) {
                    n = n.checked_mul(10)?.checked_add(u64::from(d))?;
                    it.next();
                }
                Value::Int(n)
            }
            _ => return None,
        };
        out.insert(key, value);
    }
    it.all(char::is_whitespace).then_some(out)
}

/// The string under `key`.
pub fn str_of<'a>(m: &'a BTreeMap<String, Value>, key: &str) -> Option<&'a str> {
    match m.get(key)? {
        Value::Str(s) => Some(s),
        Value::Int(_) => None,
    }
}

/// The number under `key`.
pub fn int_of(m: &BTreeMap<String, Value>, key: &str) -> Option<u64> {
    match m.get(key)? {
        Value::Int(n) => Some(*n),
        Value::Str(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_of_strings_reads_back_as_written() {
        let ids = ["pits-id", "a \"b\"\\c"];
        let text = render_strings(&ids);
        assert_eq!(render_strings(&["a", "b"]), r#"["a" "b"]"#);
        assert_eq!(parse_strings(&text).unwrap(), ids);
        assert_eq!(parse_strings(r#"[ "a", "b" ]"#).unwrap(), ["a", "b"]);
        assert_eq!(parse_strings("[]").unwrap(), Vec::<String>::new());
        for bad in ["", "a", r#"["a" b]"#, r#"["a""#, r#"[["a"]]"#, r#"["a"] x"#] {
            assert_eq!(parse_strings(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_map_reads_back_as_written() {
        let text = render(&[
            ("attempt", Value::Int(3)),
            ("last-error", Value::Str("a \"b\"\\c\nd".into())),
        ]);
        let m = parse(&text).unwrap();
        assert_eq!(int_of(&m, "attempt"), Some(3));
        assert_eq!(str_of(&m, "last-error"), Some("a \"b\"\\c\nd"));
    }

    #[test]
    fn anything_but_a_flat_map_is_refused() {
        for bad in [
            "",
            "[1 2]",
            "{:a [1]}",
            "{:a 1",
            "{:a \"x}",
            "{a 1}",
            "{:a 1} x",
            "{:a 99999999999999999999999}",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
