//! The write-service's error: every refusal and failure of a write path, so that a path states a
//! failed statement or a denied write with `?` and the answer is decided here, in one place.

use buzz_bus::{BusError, ErrorCode};
use buzz_store::access::WriteDenial;

/// A write path's result.
pub type WriteResult<T> = Result<T, WriteError>;

/// Why a write was not applied.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Refused with this answer (`invalid:`, `blocked:`, `restricted:`, `conflict:` ...).
    #[error("{0}")]
    Refused(BusError),
    /// Refused by the access module's write rule (the kind-9 check).
    #[error("write denied: {0:?}")]
    Denied(WriteDenial),
    /// A statement failed before the commit: the transaction rolls back, nothing was stored.
    #[error("statement failed: {0}")]
    Storage(#[from] sqlx::Error),
    /// The commit itself failed: whether it took effect is unknown.
    #[error("commit failed: {0}")]
    Commit(#[source] sqlx::Error),
}

impl WriteError {
    /// `invalid:` with `message`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Refused(BusError::invalid(message))
    }
    /// `restricted:` with `message`.
    pub fn restricted(message: impl Into<String>) -> Self {
        Self::Refused(BusError::restricted(message))
    }
    /// `blocked:` with `message`.
    pub fn blocked(message: impl Into<String>) -> Self {
        Self::Refused(BusError::blocked(message))
    }
    /// Refused with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::Refused(BusError::new(code, message))
    }
}

impl From<BusError> for WriteError {
    fn from(e: BusError) -> Self {
        Self::Refused(e)
    }
}

impl From<WriteDenial> for WriteError {
    fn from(d: WriteDenial) -> Self {
        Self::Denied(d)
    }
}

/// The answer to a write that ran into its database time budget before its commit: it was rolled
/// back.
pub const BUSY: &str = "database busy, nothing was stored; resubmitting is safe";

impl From<WriteError> for BusError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Refused(e) => e,
            WriteError::Denied(d) => denial(d),
            WriteError::Storage(e) => storage(&e),
            // Whether it took effect is unknown to us, so the answer claims nothing (`error:` =
            // outcome unknown; resubmitting the same event is safe, a duplicate is `OK true`).
            WriteError::Commit(e) => {
                tracing::error!(error = %e, "commit failed");
                BusError::unavailable("storage unavailable")
            }
        }
    }
}

fn denial(d: WriteDenial) -> BusError {
    let (prefix, message) = d.reason();
    let code = if prefix == "blocked" { ErrorCode::Blocked } else { ErrorCode::Restricted };
    BusError::new(code, message)
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
    BusError::unavailable("storage unavailable")
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
        let unavailable = BusError::unavailable("storage unavailable");
        assert_eq!(answer(sqlx::Error::Protocol("detail".into())), unavailable);
        assert_eq!(answer(WriteError::Commit(sqlx::Error::PoolTimedOut)), unavailable);
    }

    #[test]
    fn denials_keep_the_access_modules_prefix_and_text() {
        assert_eq!(answer(WriteDenial::Archived), BusError::blocked("channel is archived"));
        assert_eq!(
            answer(WriteDenial::NotFound),
            BusError::restricted("channel not found or not accessible")
        );
        assert_eq!(
            answer(WriteDenial::Scope),
            BusError::restricted("token does not allow writing to this channel")
        );
        assert_eq!(answer(WriteDenial::NotMember), BusError::restricted("not a member of this channel"));
    }

    #[test]
    fn refusals_pass_through_unchanged() {
        let refusal = BusError::new(ErrorCode::Conflict, "prev is not the current revision");
        assert_eq!(answer(refusal.clone()), refusal);
    }
}
