//! Human durations for the config and filters: `500ms`, `90s`, `2m`, `2h`, `1d`,
//! or a bare number of seconds.

use std::fmt;
use std::time::Duration;

/// A `Duration` that (de)serialises as `90s` / `2h` / a number of seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

impl Dur {
    pub const fn secs(s: u64) -> Dur {
        Dur(Duration::from_secs(s))
    }
    pub const fn millis(ms: u64) -> Dur {
        Dur(Duration::from_millis(ms))
    }
}

/// A duration that does not parse, in words for whoever typed it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadDuration(pub String);

/// Parses `500ms`, `90s`, `2m`, `2h`, `1d` or `42` (seconds).
pub fn parse(s: &str) -> Result<Duration, BadDuration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        BadDuration(format!(
            "invalid duration '{s}': expected e.g. 500ms, 90s, 2m, 2h, 1d"
        ))
    })?;
    let ms = match unit.trim() {
        "ms" => n,
        "" | "s" => n.saturating_mul(1000),
        "m" => n.saturating_mul(60_000),
        "h" => n.saturating_mul(3_600_000),
        "d" => n.saturating_mul(86_400_000),
        _ => {
            return Err(BadDuration(format!(
                "invalid duration '{s}': unit must be ms, s, m, h or d"
            )))
        }
    };
    Ok(Duration::from_millis(ms))
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) {
            write!(f, "{ms}ms")
        } else {
            write!(f, "{}s", ms / 1000)
        }
    }
}

impl<'de> serde::Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(
                    f,
                    "a duration such as 500ms, 90s, 2m, 2h or a number of seconds"
                )
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Dur, E> {
                Ok(Dur::secs(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Dur, E> {
                u64::try_from(v)
                    .map(Dur::secs)
                    .map_err(|_| E::custom("a duration cannot be negative"))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Dur, E> {
                parse(v).map(Dur).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl serde::Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("2h").unwrap(), Duration::from_secs(7200));
        assert!(parse("2x").is_err());
        assert!(parse("").is_err());
    }
}
