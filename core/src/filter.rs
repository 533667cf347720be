//! NIP-01 filters: parsing, validation against limits, and in-memory matching for live fan-out.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::Serialize;

use crate::artifact_query::ArtifactForm;
use crate::event::Event;
use crate::ids::{EventId, IdError, Pubkey};
use crate::limits::{ArtifactLimits, Limits};

/// A REQ/COUNT filter. Tag conditions are keyed by tag name without the `#`.
/// Serialises back to NIP-01 form (`#x` keys, absent fields omitted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Event ids to match.
    pub ids: Option<Vec<EventId>>,
    /// Author public keys to match.
    pub authors: Option<Vec<Pubkey>>,
    /// Kinds to match.
    pub kinds: Option<Vec<u32>>,
    /// Tag conditions: tag name (without `#`) to the values any of which matches.
    pub tags: BTreeMap<String, Vec<String>>,
    /// Oldest `created_at` to return.
    pub since: Option<i64>,
    /// Newest `created_at` to return.
    pub until: Option<i64>,
    /// Most events to return (clamped by the relay).
    pub limit: Option<u32>,
    /// NIP-AR artifact query form, parsed when the filter is; `None` for NIP-01 filters.
    pub artifact: Option<ArtifactForm>,
    /// Events to skip first (NIP-AR artifact queries).
    pub offset: Option<u32>,
    /// NIP-50 full-text search, as the client sent it (checked by [`Filter::validate`]; the
    /// store's query is [`Filter::search_query`]).
    pub search: Option<String>,
}

/// Why a filter was refused; the text is the client's `CLOSED` reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// Text after `invalid: `, e.g. "filter is not an object", "ids must be 64 lowercase hex".
    #[error("invalid: {0}")]
    Invalid(String),
    /// Text after `unsupported: `, e.g. "filter field \"nonce\" is not supported".
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl Filter {
    /// Parses one filter object. Every key is understood or refused: `ids`, `authors` (64 lowercase
    /// hex each), `kinds` (u32 array), `#<name>` (string array, name 1..=64 bytes, no NUL in the
    /// name or values), `since`, `until`,
    /// `limit` (non-negative integers), `artifact` (a form this relay answers: `current`, `history`;
    /// any other string is `Unsupported`), `offset` (non-negative integer), `search` (NIP-50, a
    /// string; its text is checked by [`Filter::validate`]). Any other key is
    /// `Unsupported`; wrong types are `Invalid`. Never silently drops a predicate.
    /// A `limit` above `u32::MAX` saturates (it is clamped to `max_limit` anyway).
    pub fn from_value(value: &serde_json::Value) -> Result<Self, FilterError> {
        let obj = value.as_object().ok_or_else(|| invalid("filter is not an object"))?;
        // A snapshot action carries keys of its own: name the transport before any key is refused.
        if obj.get("artifact").and_then(serde_json::Value::as_str) == Some("snapshot") {
            return Err(FilterError::Unsupported("snapshot uses signed POST /query".into()));
        }
        let mut filter = Filter::default();
        for (key, val) in obj {
            match key.as_str() {
                "ids" => filter.ids = Some(hex_array(val, "ids")?),
                "authors" => filter.authors = Some(hex_array(val, "authors")?),
                "kinds" => filter.kinds = Some(kind_array(val)?),
                "since" => filter.since = Some(timestamp(val, "since")?),
                "until" => filter.until = Some(timestamp(val, "until")?),
                "limit" => {
                    let n = val.as_u64().ok_or_else(|| invalid("limit must be a non-negative integer"))?;
                    filter.limit = Some(u32::try_from(n).unwrap_or(u32::MAX));
                }
                "offset" => {
                    let n = val.as_u64().ok_or_else(|| invalid("offset must be a non-negative integer"))?;
                    filter.offset = Some(u32::try_from(n).map_err(|_| invalid("offset is too large"))?);
                }
                "search" => {
                    let q = val.as_str().ok_or_else(|| invalid("search must be a string"))?;
                    filter.search = Some(q.to_owned());
                }
                "artifact" => {
                    let a = val.as_str().ok_or_else(|| invalid("artifact must be a string"))?;
                    filter.artifact = Some(artifact_form(a)?);
                }
                k => match k.strip_prefix('#') {
                    Some(name) => {
                        if name.is_empty() || name.len() > MAX_TAG_NAME_BYTES {
                            return Err(invalid("tag filter names must be 1 to 64 bytes"));
                        }
                        // No stored tag can hold NUL (events with one are refused); PostgreSQL
                        // text cannot either, so such a filter is invalid, not an outage.
                        if name.contains('\0') {
                            return Err(invalid("tag filter names must not contain NUL (U+0000)"));
                        }
                        let values = string_array(val, k)?;
                        if values.iter().any(|v| v.contains('\0')) {
                            return Err(invalid(&format!(
                                "{} values must not contain NUL (U+0000)",
                                quoted(k)
                            )));
                        }
                        filter.tags.insert(name.to_owned(), values);
                    }
                    None => {
                        return Err(FilterError::Unsupported(format!(
                            "filter field {} is not supported",
                            quoted(k)
                        )))
                    }
                },
            }
        }
        Ok(filter)
    }

    /// Checks the filter against `limits`: at most `max_filter_values` values per field, tag values at
    /// most `max_tag_value_length` bytes. Multi-character tag names on a filter without `artifact` are
    /// `Unsupported("multi-character tag filters need an artifact query ...")`.
    ///
    /// Artifact queries (`artifact` set) are checked by [`Filter::validate_artifact`] instead; a
    /// generic filter with `offset` is `Unsupported` (pagination by offset is an artifact query).
    pub fn validate(&self, limits: &Limits) -> Result<(), FilterError> {
        if self.search.is_some() && self.artifact.is_some() {
            return Err(FilterError::Unsupported(
                "search cannot be combined with an artifact query (it matches current revisions already)"
                    .into(),
            ));
        }
        self.search_query()?;
        if let Some(form) = self.artifact {
            return self.validate_artifact(form, &limits.artifacts);
        }
        if self.offset.is_some() {
            return Err(FilterError::Unsupported(
                "offset needs an artifact query (\"artifact\":\"current\" or \"history\")".into(),
            ));
        }
        let max = limits.max_filter_values;
        let too_many = |field: &str| invalid(&format!("too many values in {field} (max {max})"));
        if self.ids.as_ref().is_some_and(|v| v.len() > max) {
            return Err(too_many("ids"));
        }
        if self.authors.as_ref().is_some_and(|v| v.len() > max) {
            return Err(too_many("authors"));
        }
        if self.kinds.as_ref().is_some_and(|v| v.len() > max) {
            return Err(too_many("kinds"));
        }
        for (name, values) in &self.tags {
            if name.chars().count() > 1 && self.artifact.is_none() {
                return Err(FilterError::Unsupported(
                    "multi-character tag filters need an artifact query (\"artifact\":\"current\")".into(),
                ));
            }
            if values.len() > max {
                return Err(too_many(&format!("#{name}")));
            }
            if values.iter().any(|v| v.len() > limits.max_tag_value_length) {
                return Err(invalid(&format!(
                    "#{name} value longer than {} bytes",
                    limits.max_tag_value_length
                )));
            }
        }
        Ok(())
    }

    /// NIP-AR artifact query form: `current` (tag predicates, `limit`, `offset`) or `history`
    /// (`#d` with artifact UUIDs, `limit`, `offset`). Every over-limit value is `Invalid` naming the
    /// limit; NIP-01 fields are `Unsupported`. (An unknown form never parses: [`Filter::from_value`].)
    pub fn validate_artifact(&self, form: ArtifactForm, limits: &ArtifactLimits) -> Result<(), FilterError> {
        if self.ids.is_some()
            || self.authors.is_some()
            || self.kinds.is_some()
            || self.since.is_some()
            || self.until.is_some()
        {
            return Err(FilterError::Unsupported(
                "artifact queries take only #<tag> predicates, limit and offset".into(),
            ));
        }
        if self.tags.len() > limits.max_predicates {
            return Err(invalid(&format!("too many tag predicates (max {})", limits.max_predicates)));
        }
        let mut total = 0usize;
        for (name, values) in &self.tags {
            if name.len() > limits.max_tag_name_bytes {
                return Err(invalid(&format!("tag name longer than {} bytes", limits.max_tag_name_bytes)));
            }
            if values.len() > limits.max_values_per_predicate {
                return Err(invalid(&format!(
                    "too many values in #{name} (max {})",
                    limits.max_values_per_predicate
                )));
            }
            if values.iter().any(|v| v.len() > limits.max_tag_value_bytes) {
                return Err(invalid(&format!(
                    "#{name} value longer than {} bytes",
                    limits.max_tag_value_bytes
                )));
            }
            total += name.len() + values.iter().map(String::len).sum::<usize>();
        }
        if total > limits.max_total_tag_bytes {
            return Err(invalid(&format!(
                "tag predicates longer than {} bytes in total",
                limits.max_total_tag_bytes
            )));
        }
        if self.limit.is_some_and(|l| l > limits.max_limit) {
            return Err(invalid(&format!("limit above {}", limits.max_limit)));
        }
        if self.offset.is_some_and(|o| o > limits.max_offset) {
            return Err(invalid(&format!("offset above {}", limits.max_offset)));
        }
        if form == ArtifactForm::History {
            let Some(ds) = self.tags.get("d") else {
                return Err(invalid("an artifact history query needs #d"));
            };
            if self.tags.len() > 1 {
                return Err(FilterError::Unsupported(
                    "an artifact history query takes only #d, limit and offset".into(),
                ));
            }
            if !ds.iter().all(|d| is_lower_uuid(d)) {
                return Err(invalid("#d values must be lowercase hyphenated UUIDs"));
            }
        }
        Ok(())
    }

    /// The effective limit: `min(limit.unwrap_or(default), max_limit)`, where the default is
    /// `default_limit`, or [`search::DEFAULT_SEARCH_LIMIT`] for a search (at most `default_limit`).
    #[must_use]
    pub fn effective_limit(&self, limits: &Limits) -> u32 {
        let default = match self.search {
            Some(_) => search::DEFAULT_SEARCH_LIMIT.min(limits.default_limit),
            None => limits.default_limit,
        };
        self.limit.unwrap_or(default).min(limits.max_limit)
    }

    /// The NIP-50 query the store runs (`websearch_to_tsquery` text, ignored extensions removed),
    /// `None` without `search`; `Invalid` when the text cannot be a search (see
    /// [`search::store_query`]).
    pub fn search_query(&self) -> Result<Option<String>, FilterError> {
        self.search.as_deref().map(search::store_query).transpose().map_err(FilterError::Invalid)
    }

    /// NIP-01 match of one event (ids, authors, kinds, since/until inclusive, each `#x` condition
    /// against the first value of tags named x: AND across names, OR within a name). `limit` is ignored.
    /// An empty `ids`/`authors`/`kinds`/tag value list matches nothing. `artifact` and `offset` are
    /// ignored too (they shape stored queries, not live matching).
    /// An artifact query matches only revisions (kind 45010) live. A search matches nothing live
    /// (search subscriptions end at `EOSE`: full-text matching is the store's).
    #[must_use]
    pub fn matches(&self, event: &Event) -> bool {
        if self.search.is_some() {
            return false;
        }
        if self.artifact.is_some() && event.kind != crate::nipar::KIND_REVISION {
            return false;
        }
        if self.since.is_some_and(|s| event.created_at < s)
            || self.until.is_some_and(|u| event.created_at > u)
        {
            return false;
        }
        if self.kinds.as_ref().is_some_and(|k| !k.contains(&event.kind)) {
            return false;
        }
        if self.ids.as_ref().is_some_and(|ids| !ids.contains(&event.id)) {
            return false;
        }
        if self.authors.as_ref().is_some_and(|a| !a.contains(&event.pubkey)) {
            return false;
        }
        self.tags.iter().all(|(name, values)| {
            event
                .tags
                .iter()
                .filter(|t| t.first().is_some_and(|n| n == name))
                .filter_map(|t| t.get(1))
                .any(|v| values.iter().any(|want| want == v))
        })
    }

    /// Live delivery of NIP-AR current state: should a subscription with this filter receive
    /// `event` (a kind-45010 revision or a kind-45011 removal) because the artifact's replaced
    /// current revision matched it? `replaced` is that revision's tags as `[name, lowercase hex
    /// sha256(first value)]`; empty when nothing served was replaced. Only `artifact: current`
    /// filters answer yes: the event then tells the subscriber that the artifact changed out of
    /// its results (the new revision no longer matches, or a move took it away).
    #[must_use]
    pub fn matched_replaced(&self, event: &Event, replaced: &[[String; 2]]) -> bool {
        if replaced.is_empty()
            || self.artifact != Some(ArtifactForm::Current)
            || !(event.kind == crate::nipar::KIND_REVISION || event.kind == crate::nipar::KIND_REMOVAL)
        {
            return false;
        }
        self.tags.iter().all(|(name, values)| {
            values.iter().any(|v| {
                let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(v.as_bytes()));
                replaced.iter().any(|[n, h]| n == name && *h == hash)
            })
        })
    }

    /// The filter back as a JSON value in NIP-01 form.
    #[must_use]
    pub fn to_value(&self) -> serde_json::Value {
        use serde_json::Value;
        let mut map = serde_json::Map::new();
        if let Some(ids) = &self.ids {
            map.insert("ids".into(), ids.iter().map(|i| Value::from(i.as_str())).collect());
        }
        if let Some(authors) = &self.authors {
            map.insert("authors".into(), authors.iter().map(|a| Value::from(a.as_str())).collect());
        }
        if let Some(kinds) = &self.kinds {
            map.insert("kinds".into(), Value::from(kinds.clone()));
        }
        for (name, values) in &self.tags {
            map.insert(format!("#{name}"), Value::from(values.clone()));
        }
        if let Some(since) = self.since {
            map.insert("since".into(), Value::from(since));
        }
        if let Some(until) = self.until {
            map.insert("until".into(), Value::from(until));
        }
        if let Some(limit) = self.limit {
            map.insert("limit".into(), Value::from(limit));
        }
        if let Some(artifact) = self.artifact {
            map.insert("artifact".into(), Value::from(artifact.as_str()));
        }
        if let Some(offset) = self.offset {
            map.insert("offset".into(), Value::from(offset));
        }
        if let Some(search) = &self.search {
            map.insert("search".into(), Value::from(search.as_str()));
        }
        Value::Object(map)
    }
}

/// Longest tag name accepted after `#` in a filter key.
const MAX_TAG_NAME_BYTES: usize = 64;

/// The artifact query form `a` names: `snapshot` (a separate transport: signed `POST /query`) and
/// any other unknown form are `Unsupported`.
fn artifact_form(a: &str) -> Result<ArtifactForm, FilterError> {
    match (ArtifactForm::parse(a), a) {
        (Some(form), _) => Ok(form),
        (None, "snapshot") => Err(FilterError::Unsupported("snapshot uses signed POST /query".into())),
        (None, other) => Err(FilterError::Unsupported(format!(
            "artifact query {} is not supported (current, history)",
            quoted(other)
        ))),
    }
}

/// A lowercase hyphenated UUID, as artifact `d` tags are.
fn is_lower_uuid(s: &str) -> bool {
    crate::ids::parse_uuid(s).is_some()
}

fn invalid(msg: &str) -> FilterError {
    FilterError::Invalid(msg.to_owned())
}

/// `key` as a JSON string, cut to a readable length for error messages.
fn quoted(key: &str) -> String {
    let short: String = key.chars().take(64).collect();
    serde_json::to_string(&short).unwrap_or_default()
}

fn string_array(val: &serde_json::Value, field: &str) -> Result<Vec<String>, FilterError> {
    let err = || invalid(&format!("{} must be an array of strings", quoted(field)));
    let arr = val.as_array().ok_or_else(err)?;
    arr.iter().map(|v| v.as_str().map(str::to_owned).ok_or_else(err)).collect()
}

fn hex_array<T: FromStr<Err = IdError>>(val: &serde_json::Value, field: &str) -> Result<Vec<T>, FilterError> {
    let err = || invalid(&format!("{field} must be an array of 64 lowercase hex strings"));
    let arr = val.as_array().ok_or_else(err)?;
    arr.iter().map(|v| v.as_str().and_then(|s| s.parse().ok()).ok_or_else(err)).collect()
}

fn kind_array(val: &serde_json::Value) -> Result<Vec<u32>, FilterError> {
    let err = || invalid("kinds must be an array of integers from 0 to 4294967295");
    let arr = val.as_array().ok_or_else(err)?;
    arr.iter().map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(err)).collect()
}

fn timestamp(val: &serde_json::Value, field: &str) -> Result<i64, FilterError> {
    val.as_i64()
        .filter(|n| *n >= 0)
        .ok_or_else(|| invalid(&format!("{field} must be a non-negative integer")))
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

pub mod search;
#[cfg(test)]
mod tests;
