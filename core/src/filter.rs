//! NIP-01 filters: parsing, validation against limits, and in-memory matching for live fan-out.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::event::Event;
use crate::limits::Limits;

/// A REQ/COUNT filter. Tag conditions are keyed by tag name without the `#`.
/// Serialises back to NIP-01 form (`#x` keys, absent fields omitted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub ids: Option<Vec<String>>,
    pub authors: Option<Vec<String>>,
    pub kinds: Option<Vec<u32>>,
    pub tags: BTreeMap<String, Vec<String>>,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub limit: Option<u32>,
    /// NIP-AR artifact query form (`"current"`, `"history"`, `"snapshot"`); `None` for NIP-01 filters.
    pub artifact: Option<String>,
    pub offset: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// Text after `invalid: `, e.g. "filter is not an object", "ids must be 64 lowercase hex".
    #[error("invalid: {0}")]
    Invalid(String),
    /// Text after `unsupported: `, e.g. "filter field \"search\" is not supported".
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl Filter {
    /// Parses one filter object. Every key is understood or refused: `ids`, `authors` (64 lowercase
    /// hex each), `kinds` (u32 array), `#<name>` (string array, name 1..=64 bytes), `since`, `until`,
    /// `limit` (non-negative integers), `artifact` (string), `offset` (non-negative integer). Any other
    /// key is `Unsupported`; wrong types are `Invalid`. Never silently drops a predicate.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, FilterError> { todo!() }

    /// Checks the filter against `limits`: at most `max_filter_values` values per field, tag values at
    /// most `max_tag_value_length` bytes. Multi-character tag names on a filter without `artifact` are
    /// `Unsupported("multi-character tag filters need an artifact query ...")`.
    pub fn validate(&self, limits: &Limits) -> Result<(), FilterError> { todo!() }

    /// The effective limit: `min(limit.unwrap_or(default_limit), max_limit)`.
    #[must_use]
    pub fn effective_limit(&self, limits: &Limits) -> u32 { todo!() }

    /// NIP-01 match of one event (ids, authors, kinds, since/until inclusive, each `#x` condition
    /// against the first value of tags named x: AND across names, OR within a name). `limit` is ignored.
    #[must_use]
    pub fn matches(&self, event: &Event) -> bool { todo!() }

    /// The filter back as a JSON value in NIP-01 form.
    #[must_use]
    pub fn to_value(&self) -> serde_json::Value { todo!() }
}

impl Serialize for Filter {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Filter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Filter::from_value(&v).map_err(serde::de::Error::custom)
    }
}
