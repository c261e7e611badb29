//! The draft grammar and validator: never panic, every error is one line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swarm_handoff::protocol::{draft, rules};

fuzz_target!(|data: &[u8]| {
    let d = draft::parse_bytes(data);
    let mut errors = d.errors.clone();
    errors.extend(rules::validate(
        &d.fields,
        &|r| r == "coder" || r == "QA",
        &mut |c| {
            if c.starts_with('0') {
                Ok(())
            } else {
                Err(format!(
                    "Header 'commit' must resolve to exactly one Git object; '{c}' matched 0."
                ))
            }
        },
    ));
    for e in &errors {
        assert!(!e.contains('\n'), "one line per error: {e:?}");
    }
    let _ = draft::invalid_report("d", &errors);
});
