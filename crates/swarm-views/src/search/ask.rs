//! What a search asks: its words and filters. Its own module because both
//! the ranking (rank.rs) and the lookup of what it found (query.rs) read it,
//! and neither should import the other for it.

/// What to look for.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pub text: String,
    /// Sent or received by this role.
    pub role: Option<String>,
    pub kind: Option<String>,
    /// Created at or after (seconds since the epoch).
    pub since: Option<i64>,
    pub limit: usize,
}
