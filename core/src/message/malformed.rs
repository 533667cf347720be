//! Why an `EVENT`/`AUTH` payload did not deserialise into an event, in the contract's plain
//! words: the field and what it must be, never a parser's message or a Rust type name.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::event::check_created_at;
use crate::ids::EventId;

/// The fields of a NIP-01 event, in the order their problems are reported.
const FIELDS: [&str; 7] = ["id", "pubkey", "created_at", "kind", "tags", "content", "sig"];

/// An event payload that is not an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// The payload's `id` when it is 64 lowercase hex: the answer is then `OK false` for it.
    pub id: Option<EventId>,
    /// `invalid: ...`, naming the first field that is wrong and what it must be.
    pub reason: String,
}

/// Explains why `raw` (one JSON value) is not an event. `upper_limit` is how far ahead an EVENT's
/// `created_at` may be (`None` for AUTH, whose window is its own).
#[must_use]
pub fn explain(raw: &str, upper_limit: Option<u64>) -> Malformed {
    let Ok(Members(members)) = serde_json::from_str::<Members<'_>>(raw) else {
        return Malformed { id: None, reason: "invalid: event must be a JSON object".into() };
    };
    let id = members
        .iter()
        .find(|(k, _)| k == "id")
        .and_then(|(_, v)| serde_json::from_str::<String>(v.get()).ok())
        .and_then(|id| EventId::try_from(id).ok());
    Malformed { id, reason: format!("invalid: {}", problem(&members, upper_limit)) }
}

fn problem(members: &[(String, &RawValue)], upper_limit: Option<u64>) -> String {
    let mut seen: Vec<&str> = Vec::with_capacity(members.len());
    for (k, _) in members {
        if !FIELDS.contains(&k.as_str()) {
            return format!("unknown event field {}", quoted(k));
        }
        if seen.contains(&k.as_str()) {
            return format!("event field {k} appears more than once");
        }
        seen.push(k);
    }
    for field in FIELDS {
        let Some((_, value)) = members.iter().find(|(k, _)| k == field) else {
            return format!("missing event field {field}");
        };
        if let Some(why) = bad_value(field, value.get(), upper_limit) {
            return why;
        }
    }
    "malformed event".into()
}

fn bad_value(field: &str, text: &str, upper_limit: Option<u64>) -> Option<String> {
    let fails = |ok: bool, why: &str| (!ok).then(|| why.to_owned());
    match field {
        "created_at" => created_at(text, upper_limit),
        "kind" => {
            fails(serde_json::from_str::<u32>(text).is_ok(), "kind must be an integer from 0 to 4294967295")
        }
        "tags" => fails(
            serde_json::from_str::<Vec<Vec<String>>>(text).is_ok(),
            "tags must be an array of arrays of strings",
        ),
        _ => fails(serde_json::from_str::<String>(text).is_ok(), &format!("{field} must be a string")),
    }
}

/// `created_at` is a whole number of seconds written as an integer (`1e9` or `1.0` is not); one
/// beyond the integer range gets the answer its sign would get in range.
fn created_at(text: &str, upper_limit: Option<u64>) -> Option<String> {
    if serde_json::from_str::<i64>(text).is_ok() {
        return None;
    }
    let negative = text.starts_with('-');
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Some("created_at must be an integer (unix seconds)".into());
    }
    Some(match (negative, upper_limit) {
        (true, _) => check_created_at(-1, 0, 0).err().unwrap_or_default(),
        (false, Some(limit)) => check_created_at(i64::MAX, 0, limit).err().unwrap_or_default(),
        (false, None) => "created_at is too far in the future".into(),
    })
}

/// A JSON string, at most 64 characters of it.
fn quoted(s: &str) -> String {
    let short: String = s.chars().take(64).collect();
    serde_json::Value::String(short).to_string()
}

/// An object's members in order, a repeated key kept (a map would keep only the last).
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Collect;
        impl<'de> Visitor<'de> for Collect {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(Collect)
    }
}
