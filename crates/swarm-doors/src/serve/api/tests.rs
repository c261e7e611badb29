use super::*;

#[test]
fn the_form_makes_a_draft_and_errors_find_their_field() {
    let f: serde_json::Map<String, Value> = serde_json::from_value(json!({
        "body": "line one\nline two",
        "message": "hi",
        "to": "qa",
        "type": "note",
        "priority": 50,
        "subject": "",
    }))
    .unwrap();
    assert_eq!(
        compose(&f).unwrap(),
        "type: note\nto: qa\npriority: 50\nmessage: hi\n\nline one\nline two\n"
    );
    let bad: serde_json::Map<String, Value> =
        serde_json::from_value(json!({"message": "a\nto: boss"})).unwrap();
    assert_eq!(
        compose(&bad).unwrap_err(),
        ["Header 'message' must be one line."]
    );
    let e = by_field(&[
        "Unknown recipient role 'nobody'.".into(),
        "Header 'priority' must be a number.".into(),
        "Draft is empty.".into(),
    ]);
    assert_eq!(e[0].0, "to");
    assert_eq!(e[1].0, "priority");
    assert_eq!(e[2].0, "");
}
