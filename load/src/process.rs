//! How each command runs as a process: its future on a tokio runtime whose shutdown is bounded,
//! failures printed with the command's name, and the exit code (0 done, 1 failed, 2 bad flags).

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

/// Exit code of flags the command refused (clap's, and the checks clap cannot make).
pub const BAD_FLAGS: u8 = 2;

/// Prints a clap error (or help/version) and picks its exit code: 0 for help, 2 for bad flags.
#[must_use]
pub fn clap_exit(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    if e.use_stderr() {
        ExitCode::from(BAD_FLAGS)
    } else {
        ExitCode::SUCCESS
    }
}

/// Prints `who: error` for flags that passed clap but not the command's own checks: exit 2.
#[must_use]
pub fn bad_flags(who: &str, e: &anyhow::Error) -> ExitCode {
    eprintln!("{who}: {e:#}");
    ExitCode::from(BAD_FLAGS)
}

/// Runs `fut` to its end on a multi-threaded runtime (`threads` workers, or one per core), then
/// gives stragglers at most 2 s. `Err(exit code 1)` when the runtime cannot be built (printed as
/// `who: tokio runtime: ...`).
pub fn block_on<F: Future>(who: &str, threads: Option<usize>, fut: F) -> Result<F::Output, ExitCode> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = threads {
        builder.worker_threads(n);
    }
    let rt = builder.enable_all().build().map_err(|e| {
        eprintln!("{who}: tokio runtime: {e}");
        ExitCode::FAILURE
    })?;
    let out = rt.block_on(fut);
    // Never wait long for stragglers (tasks are bounded, but shutdown should be too).
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(out)
}

/// Exit 0 for `Ok`, 1 (with `who: error` printed) for `Err`.
#[must_use]
pub fn finished(who: &str, result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{who}: {e:#}");
            ExitCode::FAILURE
        }
    }
}
