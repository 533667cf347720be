//! Process plumbing every service shares: typed settings from the environment and shutdown signals.

use std::str::FromStr;

/// Reads `name`, or `default` when unset or empty. A set but unparsable value is an error naming the
/// variable, so a bad setting stops start-up instead of silently falling back.
pub fn env_or<T: FromStr>(name: &str, default: T) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().parse().map_err(|e| anyhow::anyhow!("invalid value for {name}: {v:?}: {e}"))
        }
        _ => Ok(default),
    }
}

/// Reads a required variable; unset or empty is an error naming it.
pub fn env_required(name: &str) -> anyhow::Result<String> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(v.trim().to_owned()),
        _ => Err(anyhow::anyhow!("{name} must be set")),
    }
}

/// A token cancelled on SIGINT or SIGTERM: what every service's `main` hands to `run`.
#[must_use]
pub fn cancel_on_signal() -> tokio_util::sync::CancellationToken {
    let token = tokio_util::sync::CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        cancel.cancel();
    });
    token
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown signal received");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_value_names_the_variable() {
        // Unique names: tests in this crate run in one process.
        std::env::set_var("BUZZ_TEST_ENV_OR_BAD", "seven");
        let err = env_or::<u32>("BUZZ_TEST_ENV_OR_BAD", 7).unwrap_err().to_string();
        assert!(err.contains("BUZZ_TEST_ENV_OR_BAD"), "{err}");
        assert_eq!(env_or::<u32>("BUZZ_TEST_ENV_OR_UNSET", 7).unwrap(), 7);
        std::env::set_var("BUZZ_TEST_ENV_OR_GOOD", " 9 ");
        assert_eq!(env_or::<u32>("BUZZ_TEST_ENV_OR_GOOD", 7).unwrap(), 9);
        assert!(env_required("BUZZ_TEST_ENV_REQ_UNSET").is_err());
    }
}
