//! Read-only views for people and scripts, built from the files alone (the
//! trail of `protocol::trail`): the transcript, receipts, the audit, status,
//! attention items and the event stream.

pub mod attention;
pub mod audit;
pub mod events;
pub mod liveness;
pub mod receipts;
pub mod status;
pub mod transcript;
