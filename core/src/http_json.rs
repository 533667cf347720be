//! The JSON of the HTTP APIs (tenant and operator): request bodies read field by field, so every
//! error names the field or the body and never an implementation type, and the contract's
//! `{"error","code"}` for statuses the framework answers on its own (unknown route, wrong method,
//! oversized body).

use serde_json::{Map, Value};

/// A request body that is a JSON object with only known fields.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonObject(Map<String, Value>);

impl JsonObject {
    /// Parses `body` as a JSON object whose keys are all in `fields`. Errors: `body is not valid
    /// JSON`, `body must be a JSON object`, `unknown field "x" (expected a, b)`.
    pub fn parse(body: &[u8], fields: &[&str]) -> Result<Self, String> {
        let value: Value = serde_json::from_slice(body).map_err(|_| "body is not valid JSON".to_owned())?;
        let Value::Object(map) = value else {
            return Err("body must be a JSON object".into());
        };
        if let Some(k) = map.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(format!("unknown field {} (expected {})", quoted(k), fields.join(", ")));
        }
        Ok(Self(map))
    }

    /// True when the body names `field`, even as `null`.
    #[must_use]
    pub fn has(&self, field: &str) -> bool {
        self.0.contains_key(field)
    }

    /// The raw value of `field`; `None` when absent.
    #[must_use]
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.0.get(field)
    }

    /// A required string without NUL characters.
    pub fn string(&self, field: &str) -> Result<&str, String> {
        self.opt_string(field)?.ok_or_else(|| format!("missing field {field}"))
    }

    /// An optional string without NUL characters; absent or `null` is `None`.
    pub fn opt_string(&self, field: &str) -> Result<Option<&str>, String> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => no_nul(field, s).map(Some),
            Some(_) => Err(format!("{field} must be a string")),
        }
    }

    /// An optional array of strings without NUL characters; absent or `null` is `None`.
    pub fn opt_strings(&self, field: &str) -> Result<Option<Vec<&str>>, String> {
        let items = match self.0.get(field) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(format!("{field} must be an array of strings")),
        };
        items
            .iter()
            .map(|v| match v {
                Value::String(s) => no_nul(field, s),
                _ => Err(format!("{field} must be an array of strings")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// An optional non-negative integer; absent or `null` is `None`.
    pub fn opt_u64(&self, field: &str) -> Result<Option<u64>, String> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| format!("{field} must be a non-negative integer")),
        }
    }
}

fn no_nul<'a>(field: &str, s: &'a str) -> Result<&'a str, String> {
    if s.contains('\0') {
        return Err(format!("{field} must not contain NUL (U+0000)"));
    }
    Ok(s)
}

/// `key` as a JSON string cut to 64 characters, for echoing in an error.
fn quoted(key: &str) -> String {
    let short: String = key.chars().take(64).collect();
    serde_json::to_string(&short).unwrap_or_default()
}

/// The contract's `(code, error)` for an error status the HTTP framework produced without a body
/// of ours: unknown route, wrong method, oversized body, and anything else by its status.
#[must_use]
pub fn status_error(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => ("invalid_request", "bad request"),
        404 => ("not_found", "no such route"),
        405 => ("method_not_allowed", "method not allowed"),
        408 => ("timeout", "request timed out"),
        411 => ("invalid_request", "content-length required"),
        413 => ("too_large", "request body too large"),
        414 => ("too_large", "request uri too long"),
        415 => ("unsupported_media_type", "unsupported media type"),
        422 => ("invalid_request", "unprocessable request"),
        431 => ("too_large", "request headers too large"),
        s if s >= 500 => ("internal", crate::refusal::INTERNAL),
        _ => ("invalid_request", "request refused"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<JsonObject, String> {
        JsonObject::parse(body.as_bytes(), &["name", "tags", "n"])
    }

    #[test]
    fn bodies_are_objects_of_known_fields() {
        assert_eq!(parse("{").unwrap_err(), "body is not valid JSON");
        for not_object in ["[]", "\"x\"", "null", "1"] {
            assert_eq!(parse(not_object).unwrap_err(), "body must be a JSON object", "{not_object}");
        }
        assert_eq!(parse(r#"{"boss":1}"#).unwrap_err(), r#"unknown field "boss" (expected name, tags, n)"#);
        assert!(parse("{}").unwrap().string("name").unwrap_err().contains("missing field name"));
    }

    #[test]
    fn every_field_error_names_the_field() {
        let o = parse(r#"{"name": 1, "tags": ["a", 2], "n": -1}"#).unwrap();
        assert_eq!(o.string("name").unwrap_err(), "name must be a string");
        assert_eq!(o.opt_strings("tags").unwrap_err(), "tags must be an array of strings");
        assert_eq!(o.opt_u64("n").unwrap_err(), "n must be a non-negative integer");
        let o = parse(r#"{"name": "a\u0000", "tags": ["\u0000"], "n": null}"#).unwrap();
        assert_eq!(o.string("name").unwrap_err(), "name must not contain NUL (U+0000)");
        assert_eq!(o.opt_strings("tags").unwrap_err(), "tags must not contain NUL (U+0000)");
        assert_eq!(o.opt_u64("n"), Ok(None));
        assert!(o.has("n") && !parse("{}").unwrap().has("n"));
        let o = parse(r#"{"name": "x", "tags": ["a"], "n": 7}"#).unwrap();
        assert_eq!(
            (o.string("name"), o.opt_strings("tags"), o.opt_u64("n")),
            (Ok("x"), Ok(Some(vec!["a"])), Ok(Some(7)))
        );
    }

    #[test]
    fn framework_statuses_have_contract_codes() {
        assert_eq!(status_error(404).0, "not_found");
        assert_eq!(status_error(405).0, "method_not_allowed");
        assert_eq!(status_error(413).0, "too_large");
        assert_eq!(status_error(503).0, "internal");
    }
}
