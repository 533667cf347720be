//! REQ/COUNT answers and the access answers gateways need.

use std::collections::HashSet;

use buzz_bus::{AccessReply, AccessRequest, BusError, ErrorCode, QueryFrameBody, QueryRequest, Scope};
use buzz_core::Limits;
use futures::TryStreamExt;
use sqlx::PgPool;

use crate::sql::{self, Reader};

/// Largest frame of events put on the bus (NATS' default payload limit is 1 MiB).
const FRAME_BYTES: usize = 256 * 1024;
const FRAME_EVENTS: usize = 200;

pub struct Querier {
    pub pool: PgPool,
    pub limits: Limits,
    pub statement_timeout_ms: u64,
}

fn sql_error(e: &sqlx::Error) -> BusError {
    if let sqlx::Error::Database(db) = e {
        if db.code().as_deref() == Some("57014") {
            return BusError::new(ErrorCode::Timeout, "query exceeded its execution budget");
        }
    }
    tracing::error!(error = %e, "query failed");
    BusError::unavailable("storage unavailable")
}

impl Querier {
    /// Runs a REQ or COUNT, handing each frame body to `emit` in order. Errors end the stream with
    /// an `Error` frame (an incomplete result is never presented as complete).
    pub async fn run<F, Fut>(&self, req: QueryRequest, mut emit: F)
    where
        F: FnMut(QueryFrameBody) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let started = std::time::Instant::now();
        let outcome = self.answer(&req, &mut emit).await;
        match outcome {
            Ok(last) => emit(last).await,
            Err(error) => emit(QueryFrameBody::Error { error }).await,
        }
        metrics::histogram!("buzz_query_seconds", "count" => if req.count { "true" } else { "false" })
            .record(started.elapsed().as_secs_f64());
    }

    async fn answer<F, Fut>(&self, req: &QueryRequest, emit: &mut F) -> Result<QueryFrameBody, BusError>
    where
        F: FnMut(QueryFrameBody) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        if !req.reader.has_scope(Scope::MessagesRead) {
            return Err(BusError::restricted("token does not allow reading messages"));
        }
        for f in &req.filters {
            if f.artifact.is_some() {
                return Err(BusError::new(
                    ErrorCode::Unsupported,
                    "artifact queries are not supported by this relay version",
                ));
            }
            f.validate(&self.limits).map_err(|e| BusError::invalid(e.to_string()))?;
        }
        let reader = Reader {
            community: req.community_id,
            pubkey: req.reader.member_key(),
            channel_ids: req.reader.channel_ids.as_deref(),
        };
        let filters: Vec<_> = req.filters.iter().filter(|f| sql::can_match(f)).collect();
        let mut tx = self.pool.begin().await.map_err(|e| sql_error(&e))?;
        sqlx::query("SELECT set_config('statement_timeout', $1, true), set_config('transaction_read_only', 'on', true)")
            .bind(format!("{}ms", self.statement_timeout_ms))
            .execute(&mut *tx)
            .await
            .map_err(|e| sql_error(&e))?;
        if req.count {
            if filters.is_empty() {
                return Ok(QueryFrameBody::Count { count: 0 });
            }
            let count: i64 = sql::count_events(&reader, &filters)
                .build_query_scalar()
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| sql_error(&e))?;
            return Ok(QueryFrameBody::Count { count: u64::try_from(count).unwrap_or(0) });
        }
        let mut seen = HashSet::new();
        let mut batch = Vec::new();
        let mut batch_bytes = 0;
        let mut total = 0u64;
        for f in filters {
            let limit = f.effective_limit(&self.limits);
            let mut qb = sql::select_events(&reader, f, limit);
            let mut rows = qb.build_query_as::<(String, String)>().fetch(&mut *tx);
            while let Some((id, raw)) = rows.try_next().await.map_err(|e| sql_error(&e))? {
                if !seen.insert(id) {
                    continue;
                }
                batch_bytes += raw.len();
                batch.push(raw);
                total += 1;
                if batch.len() >= FRAME_EVENTS || batch_bytes >= FRAME_BYTES {
                    emit(QueryFrameBody::Events { events: std::mem::take(&mut batch) }).await;
                    batch_bytes = 0;
                }
            }
        }
        if !batch.is_empty() {
            emit(QueryFrameBody::Events { events: batch }).await;
        }
        Ok(QueryFrameBody::Done { total })
    }

    pub async fn access(&self, req: AccessRequest) -> Result<AccessReply, BusError> {
        let mut conn = self.pool.acquire().await.map_err(|e| sql_error(&e))?;
        match req {
            AccessRequest::Member { community_id, pubkey } => {
                let role = buzz_store::access::community_role(&mut conn, community_id, &pubkey)
                    .await
                    .map_err(|e| sql_error(&e))?;
                let role = role.as_deref().and_then(buzz_bus::Role::parse);
                Ok(AccessReply { role, can_read: false, token: None })
            }
            AccessRequest::CanRead { community_id, reader, channel_id } => {
                let channel = buzz_store::access::load_channel(&mut conn, community_id, channel_id, false)
                    .await
                    .map_err(|e| sql_error(&e))?;
                let standing =
                    buzz_store::access::standing(&mut conn, community_id, channel_id, reader.member_key())
                        .await
                        .map_err(|e| sql_error(&e))?;
                let cred = buzz_store::access::Credential {
                    can_read_messages: reader.has_scope(Scope::MessagesRead),
                    can_write_messages: reader.has_scope(Scope::MessagesWrite),
                    channel_ids: reader.channel_ids.as_deref(),
                };
                let can_read = channel.is_some_and(|c| buzz_store::access::can_read(&c, standing, cred));
                Ok(AccessReply { role: None, can_read, token: None })
            }
            AccessRequest::Token { community_id, token_hash } => {
                crate::tokens::resolve(&self.pool, community_id, &token_hash).await
            }
        }
    }
}
