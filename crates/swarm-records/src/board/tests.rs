use super::*;
use crate::protocol::header::Header;

fn msg(headers: &[(Header, &str)]) -> Message {
    let mut m = Message::default();
    for (k, v) in headers {
        m.set(*k, *v);
    }
    m
}

/// Upstream's `ready_for_next_batch.bb`: `batch-key` is the priority,
/// the `card_type` ("" without one) and whether the file goes back
/// (`non-forwarding: true` or priority `00`); our terminal results and
/// copies say it by `delivery_kind` too.
#[test]
fn the_batch_key_is_the_card_type_and_the_direction() {
    let fwd = msg(&[(names::PRIORITY, "50"), (CARD_TYPE, "change")]);
    assert_eq!(batch_key(&fwd), ("change".to_string(), false));
    assert_eq!(
        batch_key(&msg(&[(names::PRIORITY, "50")])),
        (String::new(), false)
    );
    for back in [
        msg(&[
            (names::PRIORITY, "50"),
            (CARD_TYPE, "change"),
            (NON_FORWARDING, "true"),
        ]),
        msg(&[(names::PRIORITY, "00"), (CARD_TYPE, "change")]),
        msg(&[
            (names::PRIORITY, "50"),
            (CARD_TYPE, "change"),
            (DELIVERY_KIND, TERMINAL),
        ]),
        msg(&[
            (names::PRIORITY, "50"),
            (CARD_TYPE, "change"),
            (DELIVERY_KIND, REVERSE),
        ]),
    ] {
        assert_eq!(batch_key(&back), ("change".to_string(), true), "{back:?}");
        assert!(!carries_card(&back));
    }
}

/// Upstream's `handoff_lib.bb` (`mail-card-ids`): a mail's cards are its
/// task plus any `batch_task_ids`; a malformed vector names none.
#[test]
fn a_message_names_its_task_and_its_batch_task_ids() {
    let m = msg(&[
        (names::TASK, "pits"),
        (BATCH_TASK_IDS, r#"["pits" "bats"]"#),
    ]);
    assert_eq!(cards_named(&m), ["pits", "bats"]);
    let bad = msg(&[(names::TASK, "pits"), (BATCH_TASK_IDS, "pits,bats")]);
    assert_eq!(cards_named(&bad), ["pits"]);
    assert_eq!(batch_task_ids(&["a".into(), "b".into()]), r#"["a" "b"]"#);
}
