//! NIP-AR stable manifest transport over `POST /query`: a filter whose `artifact` is `snapshot`
//! goes, after the same host, NIP-98/bearer and membership checks as every other `POST /query`,
//! to the snapshot-service queue group on `<p>.v1.snapshot`, and its answer (numbered frames on a
//! private inbox) is relayed as is. Snapshot errors are `{"error": code, "code": code}` with the
//! spec's status.

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use buzz_bus::snapshot::{
    SnapshotCode, SnapshotFailure, SnapshotFrame, SnapshotFrameBody, SnapshotRequest, LIMITS,
};
use buzz_bus::Actor;
use buzz_core::CommunityId;
use futures::StreamExt;

use crate::state::AppState;
use buzz_http_auth::ApiError;

/// A snapshot operation may run for the spec's eight seconds; the gateway waits a little longer
/// so that the service's own limit answers first.
const WAIT: Duration = Duration::from_millis(LIMITS.operation_timeout_ms + 2000);

/// How long a replica has to take an action (acknowledge it, before any frame). A replica that
/// does not (paused, stalled) costs the client this, not [`WAIT`]: the answer is
/// `snapshot_unavailable` (retry with backoff), and the replica drops the action if it takes it
/// later (`retry::TAKE_BY_HEADER`), so a start sent again never runs twice for nobody.
const TAKE_WAIT: Duration = Duration::from_secs(1);

/// Is this `POST /query` filter a snapshot action?
#[must_use]
pub fn is_snapshot(filter: &serde_json::Value) -> bool {
    filter.get("artifact").and_then(serde_json::Value::as_str) == Some("snapshot")
}

/// The spec's bounded error: `error` and `code` carry the same code.
#[must_use]
pub fn error(code: SnapshotCode) -> ApiError {
    let status = StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    ApiError::new(status, code.as_str(), code.as_str())
}

/// Forwards one snapshot action (the caller is an authenticated community member).
pub async fn forward(
    state: &AppState,
    community_id: CommunityId,
    reader: Actor,
    filter: serde_json::Value,
    count: bool,
) -> Result<Response, ApiError> {
    if count {
        return Err(error(SnapshotCode::SnapshotInvalid));
    }
    let req = SnapshotRequest { community_id, reader, filter };
    let body = collect(&state.nats, state.subjects.snapshot(), &req).await.map_err(|f| match f {
        SnapshotFailure::Snapshot { code } => error(code),
        SnapshotFailure::Normal { error } => {
            let nip01 = error.nip01();
            let mut e = ApiError::from(error);
            e.message = nip01;
            e
        }
    })?;
    let mut res = (StatusCode::OK, body).into_response();
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

/// Sends the request and joins the answer's chunks; a gap, a short answer, a timeout or no
/// service at all is `snapshot_unavailable` (retry with backoff), never a partial body.
async fn collect(
    nats: &async_nats::Client,
    subject: String,
    req: &SnapshotRequest,
) -> Result<String, SnapshotFailure> {
    let unavailable = SnapshotFailure::from(SnapshotCode::SnapshotUnavailable);
    let inbox = nats.new_inbox();
    let mut replies = nats.subscribe(inbox.clone()).await.map_err(|_| unavailable.clone())?;
    let payload = serde_json::to_vec(req).map_err(|_| unavailable.clone())?;
    let mut headers = buzz_bus::trace::current_headers();
    // A streamed action: the replica that takes it acknowledges it before any frame.
    headers.insert(buzz_bus::retry::ACK_HEADER, "1");
    let take_by_ms = buzz_bus::retry::unix_ms() + TAKE_WAIT.as_millis();
    headers.insert(buzz_bus::retry::TAKE_BY_HEADER, take_by_ms.to_string().as_str());
    nats.publish_with_reply_and_headers(subject, inbox, headers, payload.into())
        .await
        .map_err(|_| unavailable.clone())?;
    let started = tokio::time::Instant::now();
    let (take_by, deadline) = (started + TAKE_WAIT, started + WAIT);
    let mut taken = false;
    let mut body = String::new();
    let mut expected = 0u32;
    loop {
        let msg = match tokio::time::timeout_at(if taken { deadline } else { take_by }, replies.next()).await
        {
            Ok(Some(m)) if m.status.is_none() => m,
            Err(_) if !taken => {
                metrics::counter!("buzz_gateway_snapshot_untaken_total").increment(1);
                tracing::warn!("no snapshot replica took the action in time; answered snapshot_unavailable");
                return Err(unavailable);
            }
            // No responders, a closed subscription or the deadline.
            _ => return Err(unavailable),
        };
        taken = true;
        if buzz_bus::retry::is_ack(&msg) {
            continue;
        }
        let frame: SnapshotFrame = serde_json::from_slice(&msg.payload).map_err(|_| unavailable.clone())?;
        if frame.seq != expected {
            return Err(unavailable);
        }
        expected += 1;
        match frame.body {
            SnapshotFrameBody::Chunk { data } => body.push_str(&data),
            SnapshotFrameBody::Done { bytes } if bytes == body.len() as u64 => return Ok(body),
            SnapshotFrameBody::Done { .. } => return Err(unavailable),
            SnapshotFrameBody::Failure { failure } => return Err(failure),
        }
    }
}
