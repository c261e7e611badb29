//! Time stamps (docs/protocol.md §4): RFC 3339 UTC with microseconds for
//! headers and logs, and the second-resolution `<IDTS>` used in ids and file
//! names.

use chrono::{DateTime, SecondsFormat, Utc};

pub type Instant = DateTime<Utc>;

pub fn now() -> Instant {
    Utc::now()
}

/// `2026-06-15T14:05:31.123456Z`
pub fn iso(t: Instant) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

pub fn iso_now() -> String {
    iso(now())
}

/// `20260615T140531Z`
pub fn idts(t: Instant) -> String {
    t.format("%Y%m%dT%H%M%SZ").to_string()
}

/// Parses any RFC 3339 time stamp (ours have microseconds; SwarmForge's may have
/// milliseconds or none).
pub fn parse(s: &str) -> Option<Instant> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Parses the `<IDTS>` form.
pub fn parse_idts(s: &str) -> Option<Instant> {
    chrono::NaiveDateTime::parse_from_str(s, "%Y%m%dT%H%M%SZ")
        .ok()
        .map(|n| n.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_has_microseconds_and_z() {
        let t = parse("2026-06-15T14:05:31.123456Z").unwrap();
        assert_eq!(iso(t), "2026-06-15T14:05:31.123456Z");
        assert_eq!(idts(t), "20260615T140531Z");
        assert_eq!(
            parse_idts("20260615T140531Z").unwrap().timestamp(),
            t.timestamp()
        );
    }
}
