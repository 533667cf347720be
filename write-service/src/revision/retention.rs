//! Revision history retention: each community's `retention_days` expires revision events that are
//! older than that and no longer current. The current revision is never removed, and the
//! `artifact_revisions` rows stay, so `prev` checks and idempotent resubmission keep working.
//!
//! A revision that a live snapshot capture may hold is not removed either: "Ordinary post-capture
//! updates leave the captured revision available." A capture holds revisions that were current at
//! its start, so a revision whose successor (the revision naming it in `prev`) was accepted less
//! than [`CAPTURE_HOLD_SECONDS`] ago waits for a later pass.
//!
//! The sweep starts from the communities that have a retention (a handful of rows) and then, for
//! each, walks only that community's aged revisions through `events_revisions_by_age`
//! (`community_id, accepted_at`, kind 45010). A community that keeps its history forever (the
//! default) costs nothing. (The earlier single statement joined every revision event to its
//! community before looking at `retention_days`: at 1 000 000 revisions in a community without
//! retention, each pass of each write replica read them all and probed `artifacts` for each;
//! docs/benchmarks.md, "NIP-AR revisions".)

use buzz_bus::snapshot::CAPTURE_HOLD_SECONDS;
use buzz_core::CommunityId;
use sqlx::PgPool;

/// Deletes up to `batch` expired, non-current revision events (across communities); returns how
/// many. Replicas may run it concurrently (`SKIP LOCKED`). A revision that is not current can
/// never become current again, so nothing a concurrent write does can make the choice wrong.
pub async fn sweep_retention(pool: &PgPool, batch: i64) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    for (community, days) in with_retention(pool).await? {
        let left = batch - i64::try_from(total).unwrap_or(i64::MAX);
        if left <= 0 {
            break;
        }
        total += sweep_community(pool, community, days, left).await?;
    }
    Ok(total)
}

/// The communities that have a retention, with it in days.
async fn with_retention(pool: &PgPool) -> Result<Vec<(CommunityId, i32)>, sqlx::Error> {
    sqlx::query_as("SELECT id, retention_days FROM communities WHERE retention_days IS NOT NULL ORDER BY id")
        .fetch_all(pool)
        .await
}

/// [`sweep_retention`] for one community whose retention is `days`.
async fn sweep_community(
    pool: &PgPool,
    community: CommunityId,
    days: i32,
    batch: i64,
) -> Result<u64, sqlx::Error> {
    // The kind is written into the text (not bound) so that the planner can use the partial index
    // `events_revisions_by_age` (WHERE kind = 45010) in every plan, generic ones included.
    let n = sqlx::query(&format!(
        "DELETE FROM events WHERE (community_id, id) IN ( \
             SELECT e.community_id, e.id FROM events e \
             WHERE e.community_id = $1 AND e.kind = {} \
               AND e.accepted_at < now() - make_interval(days => $2) \
               AND NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.community_id = e.community_id \
                               AND a.current_revision = e.id) \
               AND NOT EXISTS (SELECT 1 FROM artifact_revisions s WHERE s.community_id = e.community_id \
                               AND s.prev = e.id \
                               AND s.accepted_at > now() - make_interval(secs => {hold})) \
             LIMIT $3 FOR UPDATE OF e SKIP LOCKED)",
        buzz_core::kinds::ARTIFACT_REVISION,
        hold = CAPTURE_HOLD_SECONDS
    ))
    .bind(community)
    .bind(days)
    .bind(batch)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(n)
}

/// Sweeps each community with a retention in batches of 1000 until a short batch; what the
/// write-service's sweeper runs. (A community is walked once per pass: going back to
/// [`sweep_retention`] for every batch would re-read the communities finished before.)
pub async fn sweep_all(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    for (community, days) in with_retention(pool).await? {
        loop {
            let n = sweep_community(pool, community, days, 1000).await?;
            total += n;
            if n < 1000 {
                break;
            }
        }
    }
    Ok(total)
}
