//! `POST /operator/communities/import[?host=NEW_HOST]`: recreates an exported community
//! ([`crate::portability::format`]) in this deployment, in one transaction ([`crate::portability::import::store`]).
//!
//! The body can be far larger than memory, so the operator's NIP-98 is checked in two steps:
//! everything but the body (signature, allowlist, URL, method, time window; a `payload` tag is
//! required) before a byte is read, then the body is spooled to a temporary file while it is
//! hashed, and only when the hash equals `payload` is the file imported. Nothing is written before
//! the whole body is authenticated. The signature is spent (replay guard) before the first byte
//! is spooled, so a captured header buys one spool at most, whatever body comes with it (issue 37
//! item 8); and at most `BUZZ_IMPORT_MAX_CONCURRENT` imports are received or run at once: another
//! is 503 `import_busy` before its signature is spent. The spool is capped
//! (`BUZZ_IMPORT_MAX_BYTES`) and so is a line (`BUZZ_IMPORT_MAX_LINE_BYTES`): both are 413 JSON
//! errors (`import_too_large`, `import_line_too_long`), and nothing is imported.

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{OriginalUri, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use buzz_core::nip98::{self, Nip98Error};
use buzz_core::Event;
use buzz_http_auth::HttpAuthError;
use futures::TryStreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::operator::{no_store, unavailable, ApiError, OperatorState};
use crate::portability::export::ExportState;
use crate::portability::import::store::{self, ImportError};

/// `POST /operator/communities/import`, its body streamed (no body limit).
pub fn router(state: Arc<ExportState>) -> axum::Router {
    axum::Router::new()
        .route(
            "/operator/communities/import",
            axum::routing::post(import).layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .with_state(state)
        .layer(axum::middleware::map_response(no_store))
}

/// The request's NIP-98 event, checked except for its body.
async fn authorize_head(
    state: &OperatorState,
    uri: &OriginalUri,
    headers: &HeaderMap,
) -> Result<(Event, String), ApiError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or(HttpAuthError::from(Nip98Error::Missing))?;
    let event = nip98::decode_header(value).map_err(HttpAuthError::from)?;
    let payload = event
        .tag_value("payload")
        .map(str::to_owned)
        .ok_or(HttpAuthError::from(Nip98Error::PayloadMismatch))?;
    let mut bare = event.clone();
    bare.tags.retain(|t| t.first().map(String::as_str) != Some("payload"));
    let path_and_query = uri.0.path_and_query().map_or("/", |pq| pq.as_str());
    let url = format!("{}{path_and_query}", state.origin);
    nip98::validate(&bare, "POST", &url, &[], buzz_core::unix_now(), buzz_http_auth::WINDOW_SECS)
        .map_err(HttpAuthError::from)?;
    if !state.operator_pubkeys.contains(&event.pubkey) {
        return Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", "not an operator key"));
    }
    Ok((event, payload))
}

/// A temporary file, removed when dropped.
struct Spool(PathBuf);

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// 413 `import_too_large`.
fn too_large(max: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "import_too_large",
        format!("the export is larger than {max} bytes (BUZZ_IMPORT_MAX_BYTES)"),
    )
}

/// Writes the body to a temporary file named after the request's NIP-98 event `auth` (spent, so
/// unique), at most `max` bytes, and answers it with the body's sha256 (hex).
async fn spool(body: Body, max: u64, auth: &Event) -> Result<(Spool, String), ApiError> {
    let path = std::env::temp_dir().join(format!("buzz-import-{}.ndjson", auth.id.as_str()));
    let spool = Spool(path);
    let file = tokio::fs::File::create(&spool.0).await.map_err(unavailable)?;
    let mut file = tokio::io::BufWriter::new(file);
    let mut hash = Sha256::new();
    let mut chunks = body.into_data_stream();
    let mut written = 0u64;
    while let Some(chunk) = chunks
        .try_next()
        .await
        .map_err(|e| ApiError::invalid_body(format!("the body could not be read: {e}")))?
    {
        written += chunk.len() as u64;
        if written > max {
            return Err(too_large(max));
        }
        hash.update(&chunk);
        file.write_all(&chunk).await.map_err(unavailable)?;
    }
    file.flush().await.map_err(unavailable)?;
    Ok((spool, hex::encode(hash.finalize())))
}

/// The optional `host` query parameter.
fn host_param(uri: &OriginalUri) -> Result<Option<String>, ApiError> {
    let mut host = None;
    for pair in uri.0.query().unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("host", value)) if host.is_none() => {
                let h = buzz_core::host::community_host(value)
                    .map_err(|e| ApiError::invalid_request(e.to_string()))?;
                host = Some(h);
            }
            _ => return Err(ApiError::invalid_request("the only query parameter is host, given once")),
        }
    }
    Ok(host)
}

async fn import(
    State(state): State<Arc<ExportState>>,
    uri: OriginalUri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let host = host_param(&uri)?;
    let (auth, payload) = authorize_head(&state.op, &uri, &headers).await?;
    let relay = state.relay()?;
    // A declared length over the limit is refused before a byte is spooled; a body without one
    // (chunked) is cut off when it passes the limit.
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.max_bytes) {
        return Err(too_large(state.max_bytes));
    }
    // Held until the import is done (or refused): the spool, the import's memory and its
    // connection are bounded by the permits.
    let Ok(_permit) = state.imports.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "import_busy",
            "as many imports as BUZZ_IMPORT_MAX_CONCURRENT are running; try again later",
        ));
    };
    if !state.op.guard.first_use(&auth.id).await? {
        return Err(HttpAuthError::Replay.into());
    }
    let (file, digest) = spool(body, state.max_bytes, &auth).await?;
    if digest != payload {
        return Err(HttpAuthError::from(Nip98Error::PayloadMismatch).into());
    }
    let operator = auth.pubkey;
    match store::import(&state.op.pool, relay, host.as_deref(), (&file.0, state.max_line_bytes)).await {
        Ok(done) => {
            tracing::info!(%operator, community_id = %done.community_id, host = %done.host,
                imported = done.imported, resigned = done.resigned, "community import");
            let status = if done.imported { StatusCode::CREATED } else { StatusCode::OK };
            Ok((status, Json(done)).into_response())
        }
        Err(ImportError::Invalid(why)) => Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_export", why)),
        Err(ImportError::CommunityConflict) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "community_conflict",
            "community_id already exists in this deployment with other contents; it was not changed",
        )),
        Err(ImportError::HostConflict) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "host_conflict",
            "host is bound to another community; name another with ?host=",
        )),
        Err(ImportError::LineTooLong(e)) => {
            Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "import_line_too_long", e.to_string()))
        }
        Err(ImportError::Io(e)) => Err(unavailable(e)),
        Err(ImportError::Sql(e)) => Err(unavailable(e)),
    }
}
