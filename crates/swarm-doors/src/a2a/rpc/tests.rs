use super::*;

#[test]
fn the_envelope_is_checked_with_the_spec_codes() {
    assert_eq!(parse(b"{").unwrap_err().1.code, code::PARSE);
    assert_eq!(parse(b"[]").unwrap_err().1.code, code::INVALID_REQUEST);
    let no_id = parse(br#"{"jsonrpc":"2.0","method":"GetTask"}"#).unwrap_err();
    assert_eq!(no_id.1.code, code::INVALID_REQUEST);
    let old = parse(br#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#).unwrap_err();
    assert_eq!((old.0, old.1.code), (json!(1), code::INVALID_REQUEST));
    let p = parse(br#"{"jsonrpc":"2.0","id":"a","method":"GetTask","params":[]}"#).unwrap_err();
    assert_eq!(p.1.code, code::INVALID_PARAMS);
    let ok =
        parse(br#"{"jsonrpc":"2.0","id":"a","method":"GetTask","params":{"id":"x"}}"#).unwrap();
    assert_eq!(ok.method, "GetTask");
    assert_eq!(unknown_method("message/send").code, code::METHOD_NOT_FOUND);
    assert!(unknown_method("message/send")
        .message
        .contains("SendMessage"));
}

#[test]
fn a_summary_fits_the_subject() {
    let s = summary(&"x".repeat(500), "a2a 0123456789abcdef0123456789abcdef: ");
    assert!(s.encode_utf16().count() <= 120, "{}", s.len());
    assert_eq!(summary("\n  hello\nworld", "p: "), "p: hello");
}
