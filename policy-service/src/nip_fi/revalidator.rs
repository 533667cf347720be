//! The periodic NIP-FI revalidator: reads the stored policy without row locks and tells every
//! gateway which communities require FI, so they close those communities' non-FI sockets.

use std::time::Duration;

use buzz_fi::revalidate::{RequiredCommunity, Revalidate};
use tokio_util::sync::CancellationToken;

/// One sweep: read, then publish (also when nothing is required, so gateways see every sweep).
pub async fn sweep(pool: &sqlx::PgPool, nats: &async_nats::Client, subject: &str) -> anyhow::Result<usize> {
    let rows = crate::nip_fi::store::required_communities(pool).await?;
    let required: Vec<RequiredCommunity> = rows
        .into_iter()
        .map(|(community_id, policy_generation)| RequiredCommunity { community_id, policy_generation })
        .collect();
    let n = required.len();
    let payload = serde_json::to_vec(&Revalidate { required })?;
    nats.publish(subject.to_owned(), payload.into()).await?;
    Ok(n)
}

/// Sweeps every `every` until `shutdown`.
pub async fn run(
    pool: sqlx::PgPool,
    nats: async_nats::Client,
    subject: String,
    every: Duration,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match sweep(&pool, &nats, &subject).await {
            Ok(n) => {
                metrics::counter!("buzz_policy_revalidation_sweeps_total", "outcome" => "ok").increment(1);
                tracing::debug!(required = n, "nip-fi revalidation sweep");
            }
            Err(e) => {
                metrics::counter!("buzz_policy_revalidation_sweeps_total", "outcome" => "error").increment(1);
                tracing::warn!(error = %e, "nip-fi revalidation sweep failed");
            }
        }
    }
}
