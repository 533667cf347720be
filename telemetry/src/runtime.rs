//! Process plumbing every service shares: shutdown signals (settings are in [`crate::settings`]).

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

/// Installs the SIGINT and SIGTERM handlers at once and returns the future that completes on the
/// first of them. Unlike [`shutdown_signal`], whose handlers exist only once it is first polled, a
/// signal that arrives between this call and the first poll is neither lost nor fatal (e.g.
/// Ctrl-C right after `buzz dev` printed its banner).
///
/// # Errors
/// When the handlers cannot be installed.
#[cfg(unix)]
pub fn install_shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {},
            _ = terminate.recv() => {},
        }
        tracing::info!("shutdown signal received");
    })
}

/// Elsewhere, Ctrl-C as [`shutdown_signal`] waits for it.
///
/// # Errors
/// Never; the signature matches the Unix one.
#[cfg(not(unix))]
pub fn install_shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    Ok(shutdown_signal())
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
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
