//! Read-only views for people and scripts, built from the files alone (the
//! trail of `protocol::trail`): the transcript, receipts, the audit, status
//! and attention items; `vouched` judges each file against the digests
//! handoffd journaled. (The event stream is read with `sys::log_reader`.)

pub mod attention;
pub mod audit;
pub mod liveness;
pub mod receipts;
pub mod status;
pub mod transcript;
pub mod vouched;
