//! A tool's arguments as a Rust type, from which both sides of the wire
//! are derived: the input schema `tools/list` sends (schemars) and the
//! parse of a `tools/call` (serde). The value types here check what the
//! schema cannot say (one line, at most so many bytes) and refuse with the
//! texts the tools always gave, naming the argument
//! (`next: 'wait_seconds' must be a whole number from 0 to 50.`).
//!
//! Invariant: the client may not have checked its arguments against the
//! schema, so everything the schema promises is checked again here, and a
//! refusal is a tool error the model reads, never a panic.

use std::borrow::Cow;
use std::sync::Arc;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::error::Error;
use crate::protocol::draft;
use crate::protocol::types;

/// Longest argument string accepted (a draft is at most 64 KiB anyway).
pub const MAX_ARG_BYTES: usize = draft::MAX_DRAFT_BYTES;

/// A string of at most [`MAX_ARG_BYTES`] (a body, a custom answer).
#[derive(Debug, Clone)]
pub struct Text(pub String);

/// A value that becomes one header line: a [`Text`] with no line break (a
/// draft line cannot hold one either; other control characters are the
/// draft parser's to refuse, with its text).
#[derive(Debug, Clone)]
pub struct Line(pub String);

/// A whole number from 0 to `MAX` (a larger one is refused, not clamped).
#[derive(Debug, Clone, Copy)]
pub struct Count<const MAX: u64>(pub u64);

/// A list of one-line strings (options, globs).
#[derive(Debug, Clone, Default)]
pub struct Lines(pub Vec<String>);

/// true or false.
#[derive(Debug, Clone, Copy)]
pub struct Flag(pub bool);

/// A clarify's option numbers (1 first).
#[derive(Debug, Clone, Default)]
pub struct Choices(pub Vec<usize>);

/// Each value type's schema, written inline where it is used (no `$defs`,
/// and not the type's doc: the argument's own doc describes it).
macro_rules! inline_schema {
    ($ty:ident $(<const $n:ident: u64>)?, $name:expr, $schema:tt) => {
        impl$(<const $n: u64>)? JsonSchema for $ty$(<$n>)? {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> Cow<'static, str> {
                $name.into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

inline_schema!(Text, "Text", {"type": "string"});
inline_schema!(Line, "Line", {"type": "string"});
inline_schema!(Flag, "Flag", {"type": "boolean"});
inline_schema!(Lines, "Lines", {"type": "array", "items": {"type": "string"}});
inline_schema!(Choices, "Choices", {"type": "array", "items": {"type": "integer", "minimum": 1}});
inline_schema!(Count<const MAX: u64>, format!("Count{MAX}"), {"type": "integer", "minimum": 0, "maximum": MAX});

fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(v) if v.len() <= MAX_ARG_BYTES => Ok(v),
        Value::String(v) => Err(D::Error::custom(format!(
            "must be at most {MAX_ARG_BYTES} bytes; got {}.",
            v.len()
        ))),
        _ => Err(D::Error::custom("must be a string.")),
    }
}

/// Whether `v` holds a line break (refused wherever one line is asked for).
pub fn breaks_line(v: &str) -> bool {
    v.contains(['\n', '\r'])
}

/// The refusal of a line break, after the argument's name.
pub const ONE_LINE: &str = "must be one line; got a line break.";

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        text(d).map(Text)
    }
}

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = text(d)?;
        if breaks_line(&v) {
            return Err(D::Error::custom(ONE_LINE));
        }
        Ok(Line(v))
    }
}

impl<'de, const MAX: u64> Deserialize<'de> for Count<MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)?.as_u64() {
            Some(n) if n <= MAX => Ok(Count(n)),
            _ => Err(D::Error::custom(format!(
                "must be a whole number from 0 to {MAX}."
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for Lines {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Array(a) if a.len() <= types::MAX_OPTIONS * 2 => a
                .into_iter()
                .map(|v| match v {
                    Value::String(s) if breaks_line(&s) => Err(D::Error::custom(ONE_LINE)),
                    Value::String(s) if s.len() <= MAX_ARG_BYTES => Ok(s),
                    _ => Err(D::Error::custom("must be a list of one-line strings.")),
                })
                .collect::<Result<_, _>>()
                .map(Lines),
            _ => Err(D::Error::custom("must be a list of strings.")),
        }
    }
}

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(b) => Ok(Flag(b)),
            _ => Err(D::Error::custom("must be true or false.")),
        }
    }
}

impl<'de> Deserialize<'de> for Choices {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Array(list) if list.len() <= types::MAX_OPTIONS => list
                .iter()
                .map(|v| v.as_u64().filter(|n| *n <= 999).map(|n| n as usize))
                .collect::<Option<_>>()
                .map(Choices)
                .ok_or_else(|| D::Error::custom("must be option numbers.")),
            _ => Err(D::Error::custom("must be a list of option numbers.")),
        }
    }
}

/// The input schema of argument type `T`, as `tools/list` sends it: derived
/// by schemars, without what the wire never carried (the meta-schema, the
/// type's name and doc, and `null` as a type of an optional argument: an
/// optional argument is left out, though `null` is read as left out too),
/// and with `properties` even when there are none (as MCP clients expect).
pub fn input_schema<T: JsonSchema>() -> Arc<Map<String, Value>> {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.meta_schema = None)
        .with_transform(schemars::transform::RecursiveTransform(absent_not_null))
        .into_generator();
    let mut schema = match generator.into_root_schema_for::<T>().to_value() {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    schema.remove("title");
    schema.remove("description");
    schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    Arc::new(schema)
}

/// `"type": ["string", "null"]` becomes `"type": "string"`.
fn absent_not_null(schema: &mut Schema) {
    if let Some(Value::Array(kinds)) = schema.get_mut("type") {
        kinds.retain(|k| k != "null");
        if let [only] = kinds.as_slice() {
            let only = only.clone();
            schema.insert("type".into(), only);
        }
    }
}

/// The arguments of one call read as `T`, or the refusal
/// ([`Error::BadInput`], its text without the tool's name): an unknown or
/// missing argument, or the first value its type refuses, named.
pub fn parse<T: JsonSchema + DeserializeOwned>(map: &Map<String, Value>) -> Result<T, Error> {
    let schema = input_schema::<T>();
    let known = schema.get("properties").and_then(Value::as_object);
    let open = schema.contains_key("additionalProperties");
    if !open {
        for k in map.keys() {
            if !known.is_some_and(|p| p.contains_key(k)) {
                let expected: Vec<&str> = known
                    .into_iter()
                    .flat_map(|p| p.keys().map(String::as_str))
                    .collect();
                return Err(Error::bad_input(format!(
                    "unknown argument '{}'; expected {}.",
                    crate::text::escape(k),
                    expected.join(", ")
                )));
            }
        }
    }
    let required = schema.get("required").and_then(Value::as_array);
    for r in required.into_iter().flatten().filter_map(Value::as_str) {
        if map.get(r).is_none_or(Value::is_null) {
            return Err(Error::bad_input(format!("'{r}' is required.")));
        }
    }
    serde_path_to_error::deserialize(Value::Object(map.clone())).map_err(|e| {
        let path = e.path().to_string();
        Error::bad_input(match path.as_str() {
            "." | "" => e.inner().to_string(),
            name => format!("'{}' {}", crate::text::escape(name), e.inner()),
        })
    })
}
