//! The one header parser: never panics; whatever it accepts renders and
//! re-parses to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swarm_handoff::protocol::header::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::parse_bytes(data) {
        let rendered = m.render();
        let back = Message::parse(&rendered).expect("a rendered message parses");
        assert_eq!(back.render(), rendered);
        assert_eq!(back.body, m.body);
    }
});
