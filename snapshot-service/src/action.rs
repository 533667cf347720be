//! Parsing a snapshot filter into one action. Every key is understood or refused
//! (`snapshot_invalid`), never ignored; a body batch above `bodyRows` is `snapshot_limit`.

use buzz_bus::snapshot::{SnapshotCode, LIMITS};
use buzz_core::EventId;
use buzz_core::Filter;
use serde_json::{Map, Value};

use crate::manifest::{Cursor, Token};

/// A snapshot request, parsed from its filter object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Capture the identities matching `query`.
    Start {
        /// The artifact query to capture (`current` form).
        query: Filter,
    },
    /// One page of a capture's manifest.
    Page {
        /// The capture.
        token: Token,
        /// The page asked for.
        cursor: Cursor,
    },
    /// Captured bodies by revision id.
    Bodies {
        /// The capture.
        token: Token,
        /// Revision ids from the manifest.
        revisions: Vec<EventId>,
    },
    /// Validates the completion boundary. It frees nothing: "A completed capture remains
    /// replayable until expiry and counts against the resource limits during that interval."
    Complete {
        /// The capture.
        token: Token,
    },
}

impl Action {
    /// The action's name as the request spells it (a metric label).
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Start { .. } => "start",
            Self::Page { .. } => "page",
            Self::Bodies { .. } => "bodies",
            Self::Complete { .. } => "complete",
        }
    }
}

const INVALID: SnapshotCode = SnapshotCode::SnapshotInvalid;

fn only(obj: &Map<String, Value>, allowed: &[&str]) -> Result<(), SnapshotCode> {
    if obj.keys().all(|k| allowed.contains(&k.as_str())) {
        Ok(())
    } else {
        Err(INVALID)
    }
}

fn token(obj: &Map<String, Value>) -> Result<Token, SnapshotCode> {
    Token::decode(obj.get("token").and_then(Value::as_str).ok_or(INVALID)?)
}

/// Parses a snapshot filter; anything malformed or unknown is `snapshot_invalid`.
pub fn parse(filter: &Value) -> Result<Action, SnapshotCode> {
    let obj = filter.as_object().ok_or(INVALID)?;
    if obj.get("artifact").and_then(Value::as_str) != Some("snapshot") {
        return Err(INVALID);
    }
    match obj.get("action").and_then(Value::as_str).ok_or(INVALID)? {
        "start" => {
            only(obj, &["artifact", "action", "query"])?;
            Ok(Action::Start { query: query(obj.get("query").ok_or(INVALID)?)? })
        }
        "page" => {
            only(obj, &["artifact", "action", "token", "cursor"])?;
            let token = token(obj)?;
            let cursor = Cursor::decode(obj.get("cursor").and_then(Value::as_str).ok_or(INVALID)?)?;
            Ok(Action::Page { token, cursor })
        }
        "bodies" => {
            only(obj, &["artifact", "action", "token", "revisionIds"])?;
            let token = token(obj)?;
            let ids = obj.get("revisionIds").and_then(Value::as_array).ok_or(INVALID)?;
            if ids.is_empty() {
                return Err(INVALID);
            }
            if ids.len() > LIMITS.body_rows {
                return Err(SnapshotCode::SnapshotLimit);
            }
            let mut revisions = Vec::with_capacity(ids.len());
            for id in ids {
                let id = id.as_str().and_then(|s| EventId::parse(s).ok()).ok_or(INVALID)?;
                if revisions.contains(&id) {
                    return Err(INVALID);
                }
                revisions.push(id);
            }
            Ok(Action::Bodies { token, revisions })
        }
        "complete" => {
            only(obj, &["artifact", "action", "token"])?;
            Ok(Action::Complete { token: token(obj)? })
        }
        _ => Err(INVALID),
    }
}

/// The capture query: an `artifact: current` filter with tag predicates within the artifact
/// query limits, and no `limit` or `offset`.
fn query(value: &Value) -> Result<Filter, SnapshotCode> {
    let f = Filter::from_value(value).map_err(|_| INVALID)?;
    if f.artifact != Some(buzz_core::artifact_query::ArtifactForm::Current)
        || f.limit.is_some()
        || f.offset.is_some()
    {
        return Err(INVALID);
    }
    f.validate(&buzz_core::Limits::default()).map_err(|_| INVALID)?;
    Ok(f)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(v: Value) -> SnapshotCode {
        parse(&v).unwrap_err()
    }

    #[test]
    fn start_takes_current_state_tag_predicates_only() {
        let ok = json!({"artifact":"snapshot","action":"start","query":{"artifact":"current","#type":["buzz.task"]}});
        assert!(matches!(parse(&ok), Ok(Action::Start { .. })));
        for q in [
            json!({"artifact":"current","limit":10}),
            json!({"artifact":"current","offset":0}),
            json!({"artifact":"history","#d":["x"]}),
            json!({"kinds":[1]}),
            json!({"artifact":"current","kinds":[45010]}),
            json!("current"),
        ] {
            assert_eq!(code(json!({"artifact":"snapshot","action":"start","query":q})), INVALID, "{q}");
        }
        assert_eq!(code(json!({"artifact":"snapshot","action":"start"})), INVALID);
        assert_eq!(
            code(json!({"artifact":"snapshot","action":"start","query":{"artifact":"current"},"x":1})),
            INVALID
        );
        assert_eq!(code(json!({"artifact":"snapshot","action":"rewind"})), INVALID);
    }

    #[test]
    fn a_body_batch_is_1_to_body_rows_distinct_event_ids() {
        let t = Token { generation: 1, secret: [0; 16] }.encode();
        let id = |i: usize| format!("{i:064x}");
        let batch = |n: usize| json!({"artifact":"snapshot","action":"bodies","token":t,"revisionIds":(0..n).map(id).collect::<Vec<_>>()});
        assert!(matches!(parse(&batch(100)), Ok(Action::Bodies { .. })));
        assert_eq!(code(batch(101)), SnapshotCode::SnapshotLimit);
        assert_eq!(code(batch(0)), INVALID);
        let dup = json!({"artifact":"snapshot","action":"bodies","token":t,"revisionIds":[id(1), id(1)]});
        assert_eq!(code(dup), INVALID);
        let upper = json!({"artifact":"snapshot","action":"bodies","token":t,"revisionIds":["A".repeat(64)]});
        assert_eq!(code(upper), INVALID);
    }
}
