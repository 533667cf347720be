//! `GET /operator/communities/{id}/export`: the whole community as NDJSON ([`crate::portability::format`]),
//! streamed from one `REPEATABLE READ, READ ONLY` transaction, so every line belongs to one
//! snapshot while writers go on. Memory stays bounded: rows come off the connection one by one
//! (`fetch`), go out in chunks of about [`CHUNK_BYTES`] through a channel of [`CHUNKS_IN_FLIGHT`],
//! and a slow reader holds the query back rather than filling memory. A failure after the first
//! byte can no longer change the status: the stream stops without its `end` line, which import
//! refuses. Operator NIP-98 and `Cache-Control: no-store` like every operator route.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use buzz_core::{CommunityId, Keys};
use futures::TryStreamExt;
use sqlx::{PgConnection, Postgres, Transaction};
use tokio::sync::mpsc;

use crate::operator::{no_store, not_found, unavailable, ApiError, HasOperator, Operator, OperatorState};
use crate::portability::format::{Section, FORMAT, SECTIONS, VERSION};

/// Bytes gathered before a chunk is sent.
const CHUNK_BYTES: usize = 64 * 1024;
/// Chunks queued between the query and the response body.
const CHUNKS_IN_FLIGHT: usize = 16;

/// What export and import need: the operator surface and the relay's own key.
pub struct ExportState {
    /// Operator authentication and the database pool.
    pub op: Arc<OperatorState>,
    /// The relay's key (`BUZZ_RELAY_SECRET_KEY`); `None` refuses both routes.
    pub relay: Option<Keys>,
    /// The largest import body (`BUZZ_IMPORT_MAX_BYTES`).
    pub max_bytes: u64,
    /// The longest import line (`BUZZ_IMPORT_MAX_LINE_BYTES`).
    pub max_line_bytes: usize,
    /// One permit per import received or run at once (`BUZZ_IMPORT_MAX_CONCURRENT`).
    pub imports: Arc<tokio::sync::Semaphore>,
}

impl HasOperator for Arc<ExportState> {
    fn operator(&self) -> &OperatorState {
        &self.op
    }
}

impl ExportState {
    /// The relay key, or 503 `relay_key_unconfigured`.
    pub(crate) fn relay(&self) -> Result<&Keys, ApiError> {
        self.relay.as_ref().ok_or_else(|| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "relay_key_unconfigured",
                "community export and import need BUZZ_RELAY_SECRET_KEY on the policy-service",
            )
        })
    }
}

/// `GET /operator/communities/{id}/export`.
pub fn router(state: Arc<ExportState>) -> Router {
    Router::new()
        .route("/operator/communities/{id}/export", get(export))
        .with_state(state)
        .layer(axum::middleware::map_response(no_store))
}

async fn export(
    State(state): State<Arc<ExportState>>,
    Path(raw): Path<String>,
    Operator { pubkey: operator, .. }: Operator,
) -> Result<Response, ApiError> {
    let id = CommunityId::parse(&raw)
        .map_err(|_| ApiError::invalid_request("the community id in the path must be a non-nil UUID"))?;
    let relay = state.relay()?.pubkey();
    let mut tx = state.op.pool.begin().await.map_err(unavailable)?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
    let head: Option<(String, String, String)> = sqlx::query_as(
        "SELECT (to_jsonb(c) - 'access_version')::text, c.host, c.lifecycle FROM communities c \
         WHERE c.id = $1",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(unavailable)?;
    let Some((community, host, lifecycle)) = head else { return Err(not_found("community not found")) };
    if lifecycle == "deleting" {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "lifecycle_conflict",
            "the community is being deleted",
        ));
    }
    let counts = counts(&mut tx, id).await.map_err(unavailable)?;
    let header = serde_json::json!({
        "type": "header", "format": FORMAT, "version": VERSION, "relay_pubkey": relay,
        "community_id": id, "host": host, "exported_at": buzz_core::unix_now(), "counts": counts,
    });
    tracing::info!(%operator, community_id = %id, %host, %counts, "community export started");
    let (send, recv) = mpsc::channel::<Result<Bytes, std::io::Error>>(CHUNKS_IN_FLIGHT);
    let first = format!("{header}\n{{\"type\":\"community\",\"row\":{community}}}\n");
    tokio::spawn(async move {
        let mut out = Chunks { buf: first.into_bytes(), send };
        match stream_sections(&mut tx, id, &mut out).await {
            Ok(()) => {
                out.buf.extend_from_slice(format!("{{\"type\":\"end\",\"counts\":{counts}}}\n").as_bytes());
                out.flush().await;
                tracing::info!(community_id = %id, "community export finished");
            }
            Err(e) => {
                tracing::error!(community_id = %id, error = %e, "community export stopped");
                let _ = out.send.send(Err(std::io::Error::other("export stopped"))).await;
            }
        }
        let _ = tx.rollback().await;
    });
    let body = futures::stream::unfold(recv, |mut r| async move { r.recv().await.map(|c| (c, r)) });
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, "application/x-ndjson")], Body::from_stream(body))
        .into_response())
}

/// The sections whose table exists (a source before migration 0004 has no NIP-86 tables).
async fn present(tx: &mut PgConnection) -> Result<Vec<&'static Section>, sqlx::Error> {
    let mut out = Vec::with_capacity(SECTIONS.len());
    for s in &SECTIONS {
        let found: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
            .bind(s.table)
            .fetch_one(&mut *tx)
            .await?;
        if found {
            out.push(s);
        }
    }
    Ok(out)
}

/// Rows per section in the export's snapshot, as a JSON object.
async fn counts(tx: &mut PgConnection, id: CommunityId) -> Result<serde_json::Value, sqlx::Error> {
    let mut counts = serde_json::Map::new();
    for s in present(tx).await? {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {} WHERE community_id = $1", s.table))
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        counts.insert(s.kind.to_owned(), n.into());
    }
    Ok(counts.into())
}

/// Output gathered into chunks; a closed receiver (the client went away) ends the export.
struct Chunks {
    buf: Vec<u8>,
    send: mpsc::Sender<Result<Bytes, std::io::Error>>,
}

impl Chunks {
    async fn flush(&mut self) -> bool {
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        self.send.send(Ok(chunk)).await.is_ok()
    }
}

/// Writes every section's rows, in order, as lines.
async fn stream_sections(
    tx: &mut Transaction<'static, Postgres>,
    id: CommunityId,
    out: &mut Chunks,
) -> Result<(), sqlx::Error> {
    for s in present(tx).await? {
        let sql = format!(
            "SELECT to_jsonb(x)::text FROM (SELECT {} FROM {} WHERE community_id = $1) x ORDER BY {}",
            s.columns,
            s.table,
            s.order.split(", ").map(|c| format!("x.{c}")).collect::<Vec<_>>().join(", "),
        );
        let prefix = format!("{{\"type\":\"{}\",\"row\":", s.kind);
        let mut rows = sqlx::query_scalar::<_, String>(&sql).bind(id).fetch(&mut **tx);
        while let Some(row) = rows.try_next().await? {
            out.buf.extend_from_slice(prefix.as_bytes());
            out.buf.extend_from_slice(row.as_bytes());
            out.buf.extend_from_slice(b"}\n");
            if out.buf.len() >= CHUNK_BYTES && !out.flush().await {
                return Err(sqlx::Error::Protocol("the client went away".into()));
            }
        }
    }
    Ok(())
}
