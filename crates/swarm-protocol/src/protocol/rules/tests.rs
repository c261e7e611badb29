use super::*;

fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn core_only_roles_keep_swarmforge_text() {
    let allowed = allowed_for(Some(&["note".into(), "git_handoff".into()]));
    assert_eq!(allowed, vec!["git_handoff", "note"]);
    let f = fields(&[("type", "post"), ("to", "a"), ("priority", "10")]);
    let e = validate_with(
        &f,
        &Policy {
            is_role: &|r| r == "a",
            allowed: &allowed,
        },
        &mut |_| Ok(()),
    );
    assert_eq!(
        e,
        vec!["Header 'type' must be one of git_handoff or note; got 'post'."]
    );
    assert_eq!(
        type_list(),
        "git_handoff, note, post, clarify, answer, digest, close or react"
    );
}

#[test]
fn mentions_are_known_roles_at_word_starts() {
    let is_role = |r: &str| ["qa", "code-reviewer", "me"].contains(&r);
    let m = mentions(
        &["@qa, see me@qa.com and (@code-reviewer-) @ghost @me @qa"],
        "me",
        &is_role,
    );
    assert_eq!(m, vec!["qa", "code-reviewer"]);
}

#[test]
fn ids_choices_and_artifacts() {
    assert_eq!(parse_choices("1, 3"), Some(vec![1, 3]));
    assert_eq!(parse_choices("1,,3"), None);
    let sha = "a".repeat(64);
    assert_eq!(
        parse_artifact(&format!("{sha} 12 docs/a b.md")),
        Some((sha.as_str(), 12, "docs/a b.md"))
    );
    assert_eq!(parse_artifact("x 1 p"), None);
}
