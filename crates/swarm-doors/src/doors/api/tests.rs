use super::*;

fn plan(ty: &'static str) -> ReplyPlan {
    ReplyPlan {
        ty,
        to: "ada".into(),
        priority: "50".into(),
        discussion: None,
        subject: None,
    }
}

#[test]
fn answers_fit_their_type() {
    let d = draft_text(&plan("note"), "  First line 😀 that is rather long, longer than eighty characters in total, surely so.\nsecond").unwrap();
    let msg = d.lines().find_map(|l| l.strip_prefix("message: ")).unwrap();
    assert!(
        msg.encode_utf16().count() <= 80 && msg.ends_with('…'),
        "{msg}"
    );
    assert!(draft::parse(&d).errors.is_empty());
    let long = "x".repeat(5000);
    let d = draft_text(&plan("digest"), &long).unwrap();
    let parsed = draft::parse(&d);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    assert!(parsed.body.unwrap().len() <= 4096);
    assert_eq!(clean("a\r\nb\u{7}c\u{1b}[0m"), "a\nbc[0m");
    assert!(draft_text(&plan("post"), " \n\t").is_err());
}

#[test]
fn failure_reasons_fit_done_current() {
    let r = fit_reason(&"word ".repeat(100));
    assert!(crate::agent::queue::check_failed_reason(&r).is_ok(), "{r}");
}
