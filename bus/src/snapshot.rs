//! `<p>.v1.snapshot` (queue group `snapshot`): the NIP-AR stable manifest transport. The gateway
//! forwards the one filter of a signed `POST /query` whose `artifact` is `snapshot`, with the
//! community and the authenticated reader; the snapshot-service answers on the requester's inbox
//! with numbered frames carrying the HTTP body it rendered (a `bodies` answer may reach
//! `bodyBytes`, 8 MiB, above NATS' default 1 MiB payload), then `done` or one `failure`.

use buzz_core::CommunityId;
use serde::{Deserialize, Serialize};

use crate::error::BusError;
use crate::payload::Actor;

/// `<p>.v1.snapshot.purge`: remove every capture and quota charge of a community that is being
/// deleted. Purging a community without captures is no error, so the request may run twice and
/// is hedged like a read (`retry::request_retrying`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeCaptures {
    /// The community being deleted.
    pub community_id: CommunityId,
}

/// The answer to [`PurgeCaptures`]: `Ok(())` once its captures and charges are gone, else why not
/// (`unavailable` when the snapshot store did not do it).
pub type PurgeReply = Result<(), BusError>;

/// One snapshot action as the client sent it (parsed and validated by the snapshot-service).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotRequest {
    /// The community the `POST /query` was bound to by its host.
    pub community_id: CommunityId,
    /// The authenticated (NIP-98) reader.
    pub reader: Actor,
    /// The filter object, e.g. `{"artifact":"snapshot","action":"start","query":{...}}`.
    pub filter: serde_json::Value,
}

/// The spec's bounded error codes ("Limits and failures"), each with its HTTP status. The HTTP
/// body is `{"error": code, "code": code}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotCode {
    /// `snapshot_reset` (409): the capture is gone or no longer valid; start a new one.
    SnapshotReset,
    /// `snapshot_limit` (413): a spec limit (rows, bytes, captures, inspected rows) was hit.
    SnapshotLimit,
    /// `snapshot_unsupported_scope` (422): the matches include what a snapshot cannot pin (expiring events).
    SnapshotUnsupportedScope,
    /// `snapshot_invalid` (400): the filter object is malformed.
    SnapshotInvalid,
    /// `snapshot_unavailable` (503): the snapshot-service cannot answer now.
    SnapshotUnavailable,
}

impl SnapshotCode {
    /// The code string of the HTTP body.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SnapshotReset => "snapshot_reset",
            Self::SnapshotLimit => "snapshot_limit",
            Self::SnapshotUnsupportedScope => "snapshot_unsupported_scope",
            Self::SnapshotInvalid => "snapshot_invalid",
            Self::SnapshotUnavailable => "snapshot_unavailable",
        }
    }
    /// The HTTP status the gateway answers with.
    #[must_use]
    pub fn http_status(self) -> u16 {
        match self {
            Self::SnapshotReset => 409,
            Self::SnapshotLimit => 413,
            Self::SnapshotUnsupportedScope => 422,
            Self::SnapshotInvalid => 400,
            Self::SnapshotUnavailable => 503,
        }
    }
}

/// Why a snapshot request failed: a snapshot code, or an ordinary admission/membership error
/// ("Admission and membership checks can also return their normal errors").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SnapshotFailure {
    /// One of the spec's snapshot codes.
    Snapshot {
        /// Which.
        code: SnapshotCode,
    },
    /// An ordinary bus error (admission, membership, internal).
    Normal {
        /// The error.
        error: BusError,
    },
}

impl From<SnapshotCode> for SnapshotFailure {
    fn from(code: SnapshotCode) -> Self {
        Self::Snapshot { code }
    }
}

/// One frame of an answer; `seq` starts at 0 and increases by one (a gap is an error).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotFrame {
    /// Position of this frame in the answer, from 0.
    pub seq: u32,
    /// What the frame carries.
    pub body: SnapshotFrameBody,
}

/// The content of a [`SnapshotFrame`], tagged by `type` on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SnapshotFrameBody {
    /// A piece of the JSON response body, in order.
    Chunk {
        /// A piece of the body whose JSON-escaped text is at most [`CHUNK_BYTES`].
        data: String,
    },
    /// The end: `bytes` bytes of body were sent in the chunks before this frame.
    Done {
        /// Length of the whole body.
        bytes: u64,
    },
    /// The request failed; the last frame of the answer.
    Failure {
        /// Why.
        failure: SnapshotFailure,
    },
}

/// Most bytes a chunk's `data` takes in its frame, escaped (a body heavy in `"` or `\\` nearly
/// doubles when escaped, so chunks are cut by their escaped length): half of NATS' default 1 MiB
/// `max_payload`, leaving room for the envelope.
pub const CHUNK_BYTES: usize = 512 * 1024;

/// The spec's limits ("Limits and failures"): advertised in NIP-11 `artifacts.snapshot` and
/// enforced by the snapshot-service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotLimits {
    /// Most rows a capture's manifest holds.
    pub max_rows: usize,
    /// Most rows in one manifest page.
    pub page_rows: usize,
    /// Most bytes of one manifest page.
    pub page_bytes: usize,
    /// Most events in one `bodies` answer.
    pub body_rows: usize,
    /// Most bytes of one `bodies` answer.
    pub body_bytes: usize,
    /// How long a capture lives after `start`, in seconds.
    pub lifetime_seconds: u64,
    /// Active memberships, readable channels and current candidates inspected per operation.
    pub max_inspected: usize,
    /// Most bytes of one capture's internal (stored) manifest.
    pub max_manifest_bytes: usize,
    /// Most captures alive at once across replicas (shared quota).
    pub max_active_captures: usize,
    /// Most snapshot bytes charged across replicas at once (shared quota).
    pub max_charged_bytes: usize,
    /// Most live captures of one reader in one community (shared quota).
    pub captures_per_reader: usize,
    /// Most snapshot operations one snapshot-service process runs at once.
    pub operations_per_process: usize,
    /// Per-statement database limit, in milliseconds.
    pub statement_timeout_ms: u64,
    /// Elapsed limit of one operation, access checks included, in milliseconds.
    pub operation_timeout_ms: u64,
}

/// The limits this relay implements.
pub const LIMITS: SnapshotLimits = SnapshotLimits {
    max_rows: 50_000,
    page_rows: 1000,
    page_bytes: 262_144,
    body_rows: 100,
    body_bytes: 8_388_608,
    lifetime_seconds: 300,
    max_inspected: 50_000,
    max_manifest_bytes: 16 * 1024 * 1024,
    max_active_captures: 32,
    max_charged_bytes: 64 * 1024 * 1024,
    captures_per_reader: 2,
    operations_per_process: 4,
    statement_timeout_ms: 2000,
    operation_timeout_ms: 8000,
};

/// How long after a revision stops being current a live capture may still hold it, in seconds:
/// "Ordinary post-capture updates leave the captured revision available." A capture holds only
/// revisions that were current when its transaction began, and expires at most the operation limit
/// plus its lifetime later; a minute more covers PostgreSQL's and Redis' clocks disagreeing. The
/// write-service's retention sweep keeps a revision at least this long after its successor.
pub const CAPTURE_HOLD_SECONDS: u64 = LIMITS.lifetime_seconds + LIMITS.operation_timeout_ms / 1000 + 60;

/// NIP-11 `artifacts.snapshot`: exactly the spec's table.
#[must_use]
pub fn nip11() -> serde_json::Value {
    serde_json::json!({
        "version": 1,
        "maxRows": LIMITS.max_rows,
        "pageRows": LIMITS.page_rows,
        "pageBytes": LIMITS.page_bytes,
        "bodyRows": LIMITS.body_rows,
        "bodyBytes": LIMITS.body_bytes,
        "lifetimeSeconds": LIMITS.lifetime_seconds,
        "permanentChannelsOnly": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_snapshot_code_has_the_specs_status() {
        let table = [
            (SnapshotCode::SnapshotReset, 409, "snapshot_reset"),
            (SnapshotCode::SnapshotLimit, 413, "snapshot_limit"),
            (SnapshotCode::SnapshotUnsupportedScope, 422, "snapshot_unsupported_scope"),
            (SnapshotCode::SnapshotInvalid, 400, "snapshot_invalid"),
            (SnapshotCode::SnapshotUnavailable, 503, "snapshot_unavailable"),
        ];
        for (code, status, text) in table {
            assert_eq!((code.http_status(), code.as_str()), (status, text));
            assert_eq!(serde_json::to_value(code).ok(), Some(serde_json::Value::from(text)));
        }
    }
}
