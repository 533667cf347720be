//! Revision history retention: each community's `retention_days` expires revision events that are
//! older than that and no longer current. The current revision is never removed, and the
//! `artifact_revisions` rows stay, so `prev` checks and idempotent resubmission keep working.

use sqlx::PgPool;

/// Deletes up to `batch` expired, non-current revision events (across communities); returns how
/// many. Replicas may run it concurrently (`SKIP LOCKED`). A revision that is not current can
/// never become current again, so nothing a concurrent write does can make the choice wrong.
pub async fn sweep_retention(pool: &PgPool, batch: i64) -> Result<u64, sqlx::Error> {
    // The kind is written into the text (not bound) so that the planner can use the partial index
    // `events_revisions_by_age` (WHERE kind = 45010) in every plan, generic ones included.
    let n = sqlx::query(&format!(
        "DELETE FROM events WHERE (community_id, id) IN ( \
             SELECT e.community_id, e.id FROM communities c \
             JOIN events e ON e.community_id = c.id AND e.kind = {} \
                  AND e.accepted_at < now() - make_interval(days => c.retention_days) \
             WHERE c.retention_days IS NOT NULL \
               AND NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.community_id = e.community_id \
                               AND a.current_revision = e.id) \
             LIMIT $1 FOR UPDATE OF e SKIP LOCKED)",
        buzz_core::kinds::ARTIFACT_REVISION
    ))
    .bind(batch)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(n)
}

/// Sweeps in batches of 1000 until a short batch; what the write-service's sweeper runs.
pub async fn sweep_all(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    loop {
        let n = sweep_retention(pool, 1000).await?;
        total += n;
        if n < 1000 {
            return Ok(total);
        }
    }
}
