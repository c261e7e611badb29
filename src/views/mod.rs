//! Read-only views for people and scripts, built from the files alone (the
//! trail of `protocol::trail`): the transcript, receipts, the audit, status,
//! attention items and the event stream; `vouched` judges each file
//! against the digests handoffd journaled.

pub mod attention;
pub mod audit;
pub mod events;
pub mod liveness;
pub mod receipts;
pub mod status;
pub mod transcript;
pub mod vouched;
