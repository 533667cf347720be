//! The write-service's error: every refusal and failure of a write path, so that a path states a
//! failed statement or a denied write with `?` and the answer is decided here, in one place.

use buzz_bus::{BusError, ErrorCode};
use buzz_store::access::WriteDenial;

use crate::rules::Refusal;

/// A write path's result.
pub type WriteResult<T> = Result<T, WriteError>;

/// Why a write was not applied.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Refused with this answer (`invalid:`, `blocked:`, `restricted:`, `conflict:` ...): a
    /// rule's [`Refusal`], answered from its table.
    #[error("{0}")]
    Refused(BusError),
    /// A statement failed before the commit: the transaction rolls back, nothing was stored.
    #[error("statement failed: {0}")]
    Storage(#[from] sqlx::Error),
    /// The commit itself failed: whether it took effect is unknown.
    #[error("commit failed: {0}")]
    Commit(#[source] sqlx::Error),
}

impl From<BusError> for WriteError {
    fn from(e: BusError) -> Self {
        Self::Refused(e)
    }
}

/// A compare-and-swap refusal is counted in `buzz_write_cas_conflicts_total` by its reason.
impl From<Refusal> for WriteError {
    fn from(r: Refusal) -> Self {
        if let Some(reason) = r.cas_reason() {
            metrics::counter!("buzz_write_cas_conflicts_total", "reason" => reason).increment(1);
        }
        Self::Refused(r.into())
    }
}

impl From<WriteDenial> for WriteError {
    fn from(d: WriteDenial) -> Self {
        Refusal::Denied(d).into()
    }
}

/// The answer to a write whose outcome is unknown or that failed in storage: it claims nothing.
const UNAVAILABLE: &str = buzz_core::refusal::STORAGE_UNAVAILABLE;

/// The answer to a write that ran into its database time budget before its commit: it was rolled
/// back.
pub const BUSY: &str = "database busy, nothing was stored; resubmitting is safe";

impl From<WriteError> for BusError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Refused(e) => e,
            WriteError::Storage(e) => storage(&e),
            // Whether it took effect is unknown to us, so the answer claims nothing (`error:` =
            // outcome unknown; resubmitting the same event is safe, a duplicate is `OK true`).
            WriteError::Commit(e) => {
                tracing::error!(error = %e, "commit failed");
                BusError::unavailable(UNAVAILABLE)
            }
        }
    }
}

/// A lock wait, a statement or a pool wait over its budget (PostgreSQL 55P03 / 57014, pool
/// timeout) means the transaction never commits: the answer says so. Anything else is
/// `error: storage unavailable`.
fn storage(e: &sqlx::Error) -> BusError {
    let timed_out = match e {
        sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("55P03" | "57014")),
        _ => false,
    };
    if timed_out {
        tracing::warn!(error = %e, "write timed out and was rolled back");
        return BusError::new(ErrorCode::Timeout, BUSY);
    }
    tracing::error!(error = %e, "write failed");
    BusError::unavailable(UNAVAILABLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(e: impl Into<WriteError>) -> BusError {
        BusError::from(e.into())
    }

    #[test]
    fn a_pool_wait_over_budget_says_nothing_was_stored() {
        assert_eq!(answer(sqlx::Error::PoolTimedOut), BusError::new(ErrorCode::Timeout, BUSY));
    }

    #[test]
    fn other_storage_failures_and_failed_commits_claim_nothing() {
        let unavailable = BusError::unavailable(UNAVAILABLE);
        assert_eq!(answer(sqlx::Error::Protocol("detail".into())), unavailable);
        assert_eq!(answer(WriteError::Commit(sqlx::Error::PoolTimedOut)), unavailable);
    }

    #[test]
    fn denials_are_answered_by_their_code_from_the_refusal_table() {
        for d in [WriteDenial::Archived, WriteDenial::NotFound, WriteDenial::Scope, WriteDenial::NotMember] {
            let answer = answer(d);
            assert_eq!(answer, BusError::from(Refusal::Denied(d)));
            let blocked = d == WriteDenial::Archived;
            assert_eq!(answer.code, if blocked { ErrorCode::Blocked } else { ErrorCode::Restricted });
        }
    }

    #[test]
    fn refusals_pass_through_unchanged() {
        let refusal = BusError::new(ErrorCode::Conflict, "any text");
        assert_eq!(answer(refusal.clone()), refusal);
        assert_eq!(answer(Refusal::StalePrev), BusError::from(Refusal::StalePrev));
    }
}
