//! REQ/COUNT answers and the access answers gateways need.

use buzz_bus::{
    AccessReply, AccessRequest, BusError, CanReadReply, MemberReply, QueryFrameBody, QueryKind, QueryRequest,
    Scope,
};
use buzz_core::Limits;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use buzz_store::fragments::ReaderBinds;

use crate::error::sql_error;
use crate::plan::{artifact_query, Plan};
use crate::sql::{self, Reader};

/// Answers queries and access questions from one pool; cheap to share behind an `Arc`.
pub struct Querier {
    /// The read pool.
    pub pool: PgPool,
    /// Filter and artifact query limits.
    pub limits: Limits,
    /// Execution budget of a query's statements (artifact queries: at most their own budget).
    pub statement_timeout_ms: u64,
    /// A connection apart from `pool` for cancelling statements (`pg_cancel_backend`): a full
    /// pool must never stop a cancel. `None`: cancelled queries end at their budget instead.
    pub control: Option<PgPool>,
}

impl Querier {
    /// Runs a REQ or COUNT, handing each frame body to `emit` in order. Errors end the stream with
    /// an `Error` frame (an incomplete result is never presented as complete).
    pub async fn run<F, Fut>(&self, req: QueryRequest, emit: F)
    where
        F: FnMut(QueryFrameBody) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        self.run_until(req, emit, &CancellationToken::new()).await;
    }

    /// [`Self::run`] until `cancel` fires: then the statement running in PostgreSQL is cancelled
    /// too (`pg_cancel_backend` on its connection, which is held until that is done, so the
    /// cancel can never reach another query), and nothing more is emitted: the requester is gone.
    pub async fn run_until<F, Fut>(&self, req: QueryRequest, mut emit: F, cancel: &CancellationToken)
    where
        F: FnMut(QueryFrameBody) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let started = std::time::Instant::now();
        let outcome = self.answer(&req, &mut emit, cancel).await;
        match outcome {
            Ok(Some(last)) => emit(last).await,
            Ok(None) => {
                metrics::counter!("buzz_query_cancelled_total").increment(1);
                return;
            }
            Err(error) => emit(QueryFrameBody::Error { error }).await,
        }
        let count = req.kind == QueryKind::Count;
        metrics::histogram!("buzz_query_seconds", "count" => if count { "true" } else { "false" })
            .record(started.elapsed().as_secs_f64());
    }

    /// The answer's last frame, or `None` when cancelled.
    async fn answer<F, Fut>(
        &self,
        req: &QueryRequest,
        emit: &mut F,
        cancel: &CancellationToken,
    ) -> Result<Option<QueryFrameBody>, BusError>
    where
        F: FnMut(QueryFrameBody) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        if !req.reader.has_scope(Scope::MessagesRead) {
            return Err(BusError::restricted(buzz_core::refusal::READ_SCOPE));
        }
        for f in &req.filters {
            f.validate(&self.limits).map_err(|e| BusError::invalid(e.to_string()))?;
        }
        let artifact = artifact_query(&req.filters)?;
        let reader = Reader {
            community: req.community_id,
            pubkey: req.reader.member_key(),
            channel_ids: req.reader.channel_ids.as_deref(),
        };
        let filters: Vec<_> = req.filters.iter().filter(|f| sql::can_match(f, req.kind)).collect();
        let budget_ms = if artifact.is_some() {
            self.statement_timeout_ms.min(self.limits.artifacts.execution_budget_ms)
        } else {
            self.statement_timeout_ms
        };
        // The read-only transaction, as a client span of the trace (the SQL statements' time).
        let span = tracing::info_span!(
            "db.transaction",
            db.system = "postgresql",
            db.operation = "query",
            otel.kind = "client"
        );
        async {
            let opened = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(None),
                o = self.open_with_pid(&reader, budget_ms, artifact.is_some()) => o.map_err(sql_error)?,
            };
            let (tx, readable, pid) = opened;
            let plan = Plan { reader, readable, filters, artifact };
            self.execute(plan, req.kind, (tx, pid), emit, cancel).await
        }
        .instrument(span)
        .await
    }

    /// Runs `plan` in its open transaction `tx` (on backend `pid`) until done or `cancel`.
    async fn execute<F, Fut>(
        &self,
        plan: Plan<'_>,
        kind: QueryKind,
        (mut tx, pid): (sqlx::Transaction<'static, sqlx::Postgres>, i32),
        emit: &mut F,
        cancel: &CancellationToken,
    ) -> Result<Option<QueryFrameBody>, BusError>
    where
        F: FnMut(QueryFrameBody) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let work = async {
            match kind {
                QueryKind::Count => plan.count(&mut tx).await,
                QueryKind::Page => plan.page(&mut tx, &self.limits, emit).await,
            }
        };
        let done = tokio::select! {
            biased;
            r = work => Some(r),
            () = cancel.cancelled() => None,
        };
        match done {
            Some(r) => r.map(Some),
            None => {
                self.cancel_backend(pid).await;
                drop(tx);
                Ok(None)
            }
        }
    }

    /// Cancels the statement of backend `pid`, whose connection the caller still holds.
    async fn cancel_backend(&self, pid: i32) {
        let Some(control) = &self.control else { return };
        if let Err(e) = sqlx::query("SELECT pg_cancel_backend($1)").bind(pid).execute(control).await {
            tracing::warn!(error = %e, pid, "could not cancel a query's statement");
        }
    }

    /// Opens a query's transaction: one read-only snapshot (REPEATABLE READ, so every statement of
    /// the answer sees the same store), its execution budget, and for artifact queries their plan
    /// settings and the reader's readable channels, all in one round trip after `BEGIN`.
    ///
    /// Artifact queries plan each execution for its actual values (a cached generic plan cannot
    /// know how selective a tag value is and degrades to scanning every artifact), price index
    /// probes as on SSD, and bind the readable channel ids as an array value: the planner then
    /// knows how many channels the reader has and picks between walking a tag newest-first and
    /// collecting a selective tag's matches.
    pub async fn open(
        &self,
        reader: &Reader<'_>,
        budget_ms: u64,
        artifact: bool,
    ) -> Result<(sqlx::Transaction<'static, sqlx::Postgres>, Vec<buzz_core::ChannelId>), sqlx::Error> {
        self.open_with_pid(reader, budget_ms, artifact).await.map(|(tx, readable, _)| (tx, readable))
    }

    /// [`Self::open`], with the backend pid of the transaction's connection (for cancelling).
    pub async fn open_with_pid(
        &self,
        reader: &Reader<'_>,
        budget_ms: u64,
        artifact: bool,
    ) -> Result<(sqlx::Transaction<'static, sqlx::Postgres>, Vec<buzz_core::ChannelId>, i32), sqlx::Error>
    {
        let mut tx = self.pool.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").await?;
        let budget = format!("{budget_ms}ms");
        if !artifact {
            let (_, pid): (String, i32) =
                sqlx::query_as("SELECT set_config('statement_timeout', $1, true), pg_backend_pid()")
                    .bind(budget)
                    .fetch_one(&mut *tx)
                    .await?;
            return Ok((tx, Vec::new(), pid));
        }
        let (_, _, _, readable, pid): (String, String, String, Vec<buzz_core::ChannelId>, i32) =
            sqlx::query_as(&format!(
                "SELECT set_config('statement_timeout', $4, true), \
                    set_config('plan_cache_mode', 'force_custom_plan', true), \
                    set_config('random_page_cost', '1.1', true), {}, pg_backend_pid()",
                buzz_store::fragments::readable_channel_ids(ReaderBinds::FIRST)
            ))
            .bind(reader.community)
            .bind(reader.pubkey)
            .bind(reader.channel_ids.map(<[buzz_core::ChannelId]>::to_vec))
            .bind(budget)
            .fetch_one(&mut *tx)
            .await?;
        Ok((tx, readable, pid))
    }

    /// Answers an access question (membership, channel readability, bearer token).
    pub async fn access(&self, req: AccessRequest) -> Result<AccessReply, BusError> {
        let mut conn = self.pool.acquire().await.map_err(sql_error)?;
        match req {
            AccessRequest::Member { community_id, pubkey } => {
                let bans = buzz_store::bans::table_exists(&self.pool, &mut conn).await.map_err(sql_error)?;
                let (role, banned) = buzz_store::bans::role_and_ban(&mut conn, community_id, &pubkey, bans)
                    .await
                    .map_err(sql_error)?;
                Ok(AccessReply::Member(MemberReply { role, banned }))
            }
            AccessRequest::CanRead { community_id, reader, channel_id } => {
                let channel = buzz_store::access::load_channel(&mut conn, community_id, channel_id, false)
                    .await
                    .map_err(sql_error)?;
                let standing =
                    buzz_store::access::standing(&mut conn, community_id, channel_id, reader.member_key())
                        .await
                        .map_err(sql_error)?;
                let cred = buzz_store::access::Credential {
                    can_read_messages: reader.has_scope(Scope::MessagesRead),
                    can_write_messages: reader.has_scope(Scope::MessagesWrite),
                    channel_ids: reader.channel_ids.as_deref(),
                };
                let can_read = channel.is_some_and(|c| buzz_store::access::can_read(&c, standing, cred));
                Ok(AccessReply::CanRead(CanReadReply { can_read }))
            }
            AccessRequest::Token { community_id, token_hash } => {
                crate::tokens::resolve(&self.pool, community_id, &token_hash).await.map(AccessReply::Token)
            }
        }
    }
}
