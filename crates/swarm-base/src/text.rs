//! What may reach a terminal or a log line: control characters, bidi
//! overrides and separators are escaped, so a hostile name or header value
//! can neither drive a terminal nor fake a line. Below every other module.

/// Whether two secrets are equal, in time independent of where they differ
/// (the tokens of `swarm serve` and `swarm a2a`).
pub fn same_secret(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// True for C0 controls, DEL and C1 controls.
pub fn is_control(c: char) -> bool {
    let u = c as u32;
    u < 0x20 || (0x7f..=0x9f).contains(&u)
}

/// Bidi embeddings and overrides (U+202A–U+202E), isolates (U+2066–U+2069)
/// and the line and paragraph separators (U+2028, U+2029): not control
/// characters, but they reorder or break what a terminal shows, so a header
/// value could make a log line read as something else.
pub fn is_bidi_or_separator(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// Body text may hold newlines and tabs, nothing else below U+0020.
pub fn body_control(body: &str) -> Option<char> {
    body.chars()
        .find(|&c| is_control(c) && c != '\n' && c != '\t')
}

/// Escapes control characters and backslashes so any text stays on one line
/// and cannot drive a terminal (`\n`, `\t`, `\r`, `\e`, `\xNN`, `\u{..}`).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\x1b' => out.push_str("\\e"),
            c if (c as u32) < 0x80 && is_control(c) => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if is_control(c) || is_bidi_or_separator(c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// Text printed verbatim (a message body) with only the bidi controls and
/// line separators escaped (`\u{202e}`): newlines, tabs and backslashes
/// stay as they are.
pub fn escape_bidi(s: &str) -> String {
    if !s.chars().any(is_bidi_or_separator) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if is_bidi_or_separator(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// [`escape`] for text shown as several lines (a message body): newlines
/// and tabs stay, everything else `escape` escapes is escaped.
pub fn escape_lines(s: &str) -> String {
    s.split('\n')
        .map(|l| l.split('\t').map(escape).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Colour on stderr: only on a terminal, and never with `NO_COLOR` set to
/// anything non-empty (https://no-color.org). The one rule for every tool.
pub fn colour_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
