//! `GET /operator/communities/{id}/audit?after=<seq>&limit=<n>`: the community's NIP-86 changes
//! (who, when, what), oldest first, `limit` 1 to 1000 (default 100) after the sequence number
//! `after` (default 0). Answers `{"entries": [{seq, actor, method, params, at}], "next": seq|null}`;
//! `next` is the `after` of the following page. Operator NIP-98 and `Cache-Control: no-store`.

use std::sync::Arc;

use axum::extract::{OriginalUri, Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use buzz_core::CommunityId;
use serde_json::{json, Value};

use crate::operator::{no_store, unavailable, ApiError, Operator, OperatorState};

const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 1000;

/// The audit route.
pub fn router(state: Arc<OperatorState>) -> Router {
    Router::new()
        .route("/operator/communities/{id}/audit", get(audit))
        .with_state(state)
        .layer(axum::middleware::map_response(no_store))
}

/// `after` and `limit`; anything else is refused rather than ignored.
fn page(query: Option<&str>) -> Result<(i64, i64), ApiError> {
    let (mut after, mut limit) = (None, None);
    for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (slot, range) = match name {
            "after" => (&mut after, 0..=i64::MAX),
            "limit" => (&mut limit, 1..=MAX_LIMIT),
            _ => {
                let shown: String = name.chars().take(64).collect();
                return Err(ApiError::invalid_request(format!(
                    "unknown query parameter {}",
                    shown.escape_default()
                )));
            }
        };
        if slot.is_some() {
            return Err(ApiError::invalid_request(format!("{name} given more than once")));
        }
        let n = value.parse::<i64>().ok().filter(|n| range.contains(n)).ok_or_else(|| {
            ApiError::invalid_request(format!(
                "{name} must be an integer from {} to {}",
                range.start(),
                range.end()
            ))
        })?;
        *slot = Some(n);
    }
    Ok((after.unwrap_or(0), limit.unwrap_or(DEFAULT_LIMIT)))
}

type Row = (i64, String, String, Value, i64);

async fn audit(
    State(state): State<Arc<OperatorState>>,
    Path(id): Path<String>,
    uri: OriginalUri,
    _: Operator,
) -> Result<Json<Value>, ApiError> {
    let id = CommunityId::parse(&id)
        .map_err(|_| ApiError::invalid_request("the community id in the path must be a non-nil UUID"))?;
    let (after, limit) = page(uri.0.query())?;
    let exists: Option<i32> = sqlx::query_scalar("SELECT 1 FROM communities WHERE id = $1")
        .bind(id)
        .fetch_optional(&state.pool)
        .await
        .map_err(unavailable)?;
    if exists.is_none() {
        return Err(crate::operator::not_found("community not found"));
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT seq, actor, method, params, extract(epoch FROM at)::bigint FROM community_audit \
         WHERE community_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    )
    .bind(id)
    .bind(after)
    .bind(limit)
    .fetch_all(&state.pool)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(db) if db.code().as_deref() == Some("42P01") => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "schema_pending",
            "the audit log needs schema version 4: run `buzz migrate` (the chart's migrate Job)",
        ),
        _ => unavailable(e),
    })?;
    let full = i64::try_from(rows.len()).unwrap_or(i64::MAX) == limit;
    let next = if full { rows.last().map(|r| r.0) } else { None };
    let entries: Vec<Value> = rows
        .into_iter()
        .map(|(seq, actor, method, params, at)| {
            json!({ "seq": seq, "actor": actor, "method": method, "params": params, "at": at })
        })
        .collect();
    Ok(Json(json!({ "entries": entries, "next": next })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_defaults_bounds_and_refuses_unknown_parameters() {
        assert_eq!(page(None).ok(), Some((0, DEFAULT_LIMIT)));
        assert_eq!(page(Some("after=7&limit=2")).ok(), Some((7, 2)));
        for bad in ["limit=0", "limit=1001", "after=-1", "after=x", "since=1", "limit=1&limit=2"] {
            assert!(page(Some(bad)).is_err(), "{bad}");
        }
    }
}
