//! Accepting an enable or disable: one transaction under the spec's lock order, with the policy
//! change and its receipt committed together.

use buzz_core::{Lifecycle, Pubkey};
use sqlx::PgPool;

use crate::nip_fi::request::PolicyRequest;
use crate::nip_fi::store::{self, Current, Receipt, DRAIN};

/// Why an enable or disable was not accepted.
#[derive(Debug)]
pub enum AcceptError {
    /// The community does not exist: 404.
    NotFound,
    /// 409 with a `*_conflict` code.
    Conflict(&'static str, String),
    /// The policy generation is at `i64::MAX` and cannot advance: 409 `policy_generation_exhausted`.
    Exhausted,
    /// The `operation_id` was already used for a different request: 409 `idempotency_conflict`.
    Idempotency,
    /// The database failed: 503.
    Sql(sqlx::Error),
}

impl From<sqlx::Error> for AcceptError {
    fn from(e: sqlx::Error) -> Self {
        Self::Sql(e)
    }
}

/// An accepted request and its receipt.
#[derive(Debug)]
pub enum Accepted {
    /// Newly accepted in this call.
    New(Receipt),
    /// An identical committed request: its receipt, nothing written.
    Replay(Receipt),
}

/// A committed receipt under the same UUID: identical meaning replays it, anything else conflicts.
pub fn replay_or_conflict(
    r: Receipt,
    req: &PolicyRequest,
    operator: &Pubkey,
) -> Result<Accepted, AcceptError> {
    if r.same_meaning(req, operator) {
        Ok(Accepted::Replay(r))
    } else {
        Err(AcceptError::Idempotency)
    }
}

fn conflict(code: &'static str, message: &str) -> AcceptError {
    AcceptError::Conflict(code, message.to_owned())
}

/// Lifecycle, exact host, single owner and actor == owner.
fn check_target(cur: &Current, req: &PolicyRequest) -> Result<(), AcceptError> {
    if cur.lifecycle != Lifecycle::Active {
        return Err(conflict(
            "lifecycle_conflict",
            "the community is not active (archived or being deleted)",
        ));
    }
    if cur.host != req.expected_host {
        return Err(conflict("host_conflict", "expected_host is not the community's host"));
    }
    if cur.owner_pubkey != req.expected_owner_pubkey {
        return Err(conflict("owner_conflict", "expected_owner_pubkey is not the community's owner"));
    }
    if req.actor_pubkey != cur.owner_pubkey {
        return Err(conflict("owner_conflict", "actor_pubkey is not the community's owner"));
    }
    Ok(())
}

/// What the request does to the stored policy: `None` = a legacy no-op on an already-required
/// community (keeps its generation), `Some(flag)` = set the flag and advance the generation.
fn decide(cur: &Current, req: &PolicyRequest) -> Result<Option<bool>, AcceptError> {
    if req.is_legacy() {
        if cur.requires_nip_fi {
            return Ok(None);
        }
        if cur.policy_generation != 0 {
            return Err(conflict(
                "policy_conflict",
                "legacy enable refused: the policy is optional at a nonzero generation; use the general route",
            ));
        }
    } else if req.expected_generation != Some(cur.policy_generation)
        || req.expected_required != Some(cur.requires_nip_fi)
    {
        return Err(conflict(
            "policy_conflict",
            "expected_policy_generation/expected_requires_nip_fi do not match the stored policy; re-read and send a new request",
        ));
    }
    if cur.policy_generation == i64::MAX {
        return Err(AcceptError::Exhausted);
    }
    Ok(Some(req.desired))
}

/// Accepts `req` from `operator` (trust preflight already done by the caller).
pub async fn accept(pool: &PgPool, req: &PolicyRequest, operator: &Pubkey) -> Result<Accepted, AcceptError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL lock_timeout = '10s'").execute(&mut *tx).await?;
    store::lock_operation(&mut tx, req.operation_id).await?;
    if let Some(r) = store::receipt(&mut *tx, req.operation_id).await? {
        return replay_or_conflict(r, req, operator);
    }
    store::lock_deletion(&mut tx, req.community_id, false).await?;
    let cur = store::lock_community(&mut tx, req.community_id).await?.ok_or(AcceptError::NotFound)?;
    check_target(&cur, req)?;
    let change = decide(&cur, req)?;
    // Every enable, the legacy no-op included, holds its exact binding and the host lease.
    if let Some(issuer) = req.expected_issuer.as_deref() {
        if !store::hold_binding(&mut tx, req.community_id, issuer).await? {
            return Err(conflict("issuer_conflict", "the community has no binding to expected_issuer"));
        }
    }
    store::lock_host_lease(&mut tx, &cur.host).await?;
    let generation = match change {
        None => cur.policy_generation,
        Some(required) => {
            if required && !cur.requires_nip_fi {
                // Optional leases issued before the exclusion lapse within 1 s.
                metrics::counter!("buzz_policy_drains_total").increment(1);
                tokio::time::sleep(DRAIN).await;
            }
            store::set_policy(&mut tx, req.community_id, required).await?
        }
    };
    let receipt = store::insert_receipt(&mut tx, req, operator, generation).await?;
    tx.commit().await?;
    Ok(Accepted::New(receipt))
}
