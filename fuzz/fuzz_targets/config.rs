//! The swarm.yaml loader: any text gives a config or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swarm_handoff::protocol::config::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::parse(text);
    }
});
