//! How a failed statement is answered: the one mapping from `sqlx::Error` to a bus error for every
//! read path (REQ, COUNT, access, tokens, chat read model).

use buzz_bus::{BusError, ErrorCode};

/// The answer when a statement ran past its execution budget (`statement_timeout`).
pub const OVER_BUDGET: &str = "query exceeded its execution budget";

/// A statement cancelled by its timeout (PostgreSQL 57014) is `error: query exceeded its
/// execution budget`; anything else is logged and answered `error: storage unavailable`, naming
/// nothing about the store.
pub fn sql_error(e: sqlx::Error) -> BusError {
    if let sqlx::Error::Database(db) = &e {
        if db.code().as_deref() == Some("57014") {
            return BusError::new(ErrorCode::Timeout, OVER_BUDGET);
        }
    }
    tracing::error!(error = %e, "query failed");
    BusError::unavailable(buzz_core::refusal::STORAGE_UNAVAILABLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_other_than_the_budget_says_only_that_storage_is_unavailable() {
        for e in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::RowNotFound,
            sqlx::Error::Protocol("secret detail".into()),
        ] {
            let answer = sql_error(e);
            assert_eq!(answer, BusError::unavailable("storage unavailable"));
        }
    }
}
