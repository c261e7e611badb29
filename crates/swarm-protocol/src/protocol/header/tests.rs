use super::*;
use proptest::prelude::*;

#[test]
fn parses_and_renders_in_d5_order() {
    let text = "task: t\nid: x\nfrom: a\nzeta: 1\nalpha: 2\n\nbody\n";
    let m = Message::parse(text).unwrap();
    assert_eq!(m.get(Header::Task), Some("t"));
    assert_eq!(
        m.render(),
        "id: x\nfrom: a\ntask: t\nalpha: 2\nzeta: 1\n\nbody\n"
    );
}

#[test]
fn refuses_ambiguous_files() {
    assert_eq!(Message::parse("a: 1\n"), Err(ParseError::NoBlankLine));
    assert_eq!(
        Message::parse("a: 1\na: 2\n\n"),
        Err(ParseError::Duplicate(2, "a".into()))
    );
    assert_eq!(Message::parse("a 1\n\n"), Err(ParseError::NotAField(1)));
    assert_eq!(
        Message::parse("a: x\ry\n\n"),
        Err(ParseError::ControlInValue(1, "a".into()))
    );
    assert_eq!(
        Message::parse("a: 1\n\n\x1b[2J"),
        Err(ParseError::ControlInBody(0x1b))
    );
    assert!(Message::parse("artifact: 1\nartifact: 2\n\n").is_ok());
}

#[test]
fn set_replaces_or_appends() {
    let mut m = Message::parse("id: 1\n\nb").unwrap();
    m.set(Header::DequeuedAt, "t1");
    m.set(Header::DequeuedAt, "t2");
    assert_eq!(m.render(), "id: 1\ndequeued_at: t2\n\nb");
}

#[test]
fn the_header_set_is_closed_and_spelled_once() {
    for h in Header::ALL {
        assert_eq!(Header::parse(h.as_str()), Some(*h));
        assert!(valid_name(h.as_str()), "{h}");
    }
    let mut names: Vec<&str> = Header::ALL.iter().map(|h| h.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), Header::ALL.len());
    assert_eq!(Header::parse("In_reply_to"), None);
    assert_eq!(Header::parse("x-custom"), None);
    // A header no tool knows is read by name and kept by rendering.
    let m = Message::parse("x-custom: 1\nid: a\n\n").unwrap();
    assert_eq!(m.get_named("x-custom"), Some("1"));
    assert_eq!(m.render(), "id: a\nx-custom: 1\n\n");
}

#[test]
fn escape_keeps_one_line() {
    assert_eq!(escape("a\nb\x1b[31m\\"), "a\\nb\\e[31m\\\\");
    assert_eq!(escape("\u{85}"), "\\u{85}");
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,12}"
}

fn value() -> impl Strategy<Value = String> {
    "[^\\x00-\\x1f\\x7f-\\x9f]{0,40}"
}

proptest! {
    #[test]
    fn render_parse_round_trip(
        pairs in proptest::collection::btree_map(name(), value(), 0..10),
        body in "[^\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]{0,200}",
    ) {
        let m = Message { headers: pairs.into_iter().collect(), body };
        let rendered = m.render();
        let back = Message::parse(&rendered).unwrap();
        prop_assert_eq!(back.render(), rendered);
        for (n, v) in &m.headers {
            prop_assert_eq!(back.get_named(n), Some(v.as_str()));
        }
        prop_assert_eq!(back.body, m.body);
    }

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = Message::parse_bytes(&bytes);
    }
}
