//! Full-text search over every message a project said, archived ones too
//! (docs/search.md): an index of its own in `.swarmforge/search/`, derived
//! from the message files and rebuilt from them at will, kept up to date by
//! the daemon off its delivery path and caught up by every query.

mod ask;
pub mod bounds;
pub mod index;
pub mod indexer;
mod manifest;
mod pass;
pub mod query;
mod rank;
pub mod segment;
pub mod tokens;

pub use index::{Index, Refreshed};
pub use query::{search, Answer, Hit, Query};
