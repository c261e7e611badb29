//! swarm.yaml `search:`: how much of what agents write the search index
//! takes in (docs/search.md, "Bounds"; what each bound means and why is in
//! `search::bounds`). Typed here, beside the rest of the config, so reading
//! swarm.yaml needs nothing of the index.

use serde::{Deserialize, Serialize};

/// swarm.yaml `search:`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct Bounds {
    pub max_message_bytes: u64,
    pub max_pass_bytes: u64,
    pub max_pass_total_bytes: u64,
    pub max_role_bytes: u64,
    pub max_index_bytes: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_message_bytes: 32 * 1024,
            max_pass_bytes: 1024 * 1024,
            max_pass_total_bytes: 4 * 1024 * 1024,
            max_role_bytes: 32 * 1024 * 1024,
            max_index_bytes: 256 * 1024 * 1024,
        }
    }
}
