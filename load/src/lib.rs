//! `buzz-load`: a bounded load generator for buzz-relay and other Nostr relays, single-process or
//! distributed (a coordinator and workers meeting over NATS, see [`dist`]).
//!
//! Layout: `config` (flags), `client` (one WebSocket connection), `nostr` (messages and events),
//! `setup` (buzz-mode HTTP setup), `proxy` (the fault suite's TCP proxy), `publisher` / `subscriber` (per-connection loops), `stats`
//! (histograms and counters), `report` (summary and JSON), `run` (orchestration of one
//! single-process run), `dist` (the distributed tester).

mod client;
mod config;
pub mod dist;
#[cfg(test)]
mod mock;
mod nostr;
pub mod proxy;
mod publisher;
mod report;
mod run;
mod setup;
mod stats;
mod subscriber;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Parser;

use crate::config::{Args, Config};

/// The `buzz-load` command line: `buzz-load coordinator ...` and `buzz-load worker ...` run the
/// distributed tester, `check` judges its audit, `proxy` is the fault suite's link, `fi-issuers`
/// prints a seeded test issuer's `BUZZ_NIP_FI_ISSUERS`; any other arguments are the
/// single-process tool's flags.
#[must_use]
pub fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("coordinator") => return dist::coordinator_main(std::env::args().skip(1)),
        Some("worker") => return dist::worker_main(std::env::args().skip(1)),
        Some("check") => return dist::check_main(std::env::args().skip(1)),
        Some("proxy") => return proxy::proxy_main(std::env::args().skip(1)),
        Some("fi-issuers") => return dist::fi_issuers_main(std::env::args().skip(1)),
        _ => {}
    }
    let args = Args::parse();
    let cfg = match Config::try_from(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("buzz-load: {e:#}");
            return ExitCode::from(2);
        }
    };
    match run_bounded(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("buzz-load: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_bounded(cfg: &Config) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("tokio runtime")?;
    let deadline = cfg.hard_deadline();
    let result = rt.block_on(async {
        tokio::time::timeout(deadline, run::run(cfg))
            .await
            .map_err(|_| anyhow!("run exceeded its hard deadline of {deadline:?}"))?
    });
    // Never wait long for stragglers (tasks are bounded, but shutdown should be too).
    rt.shutdown_timeout(Duration::from_secs(2));
    let report = result?;
    print!("{report}");
    if let Some(path) = &cfg.json {
        report.write_json(path).with_context(|| format!("writing {}", path.display()))?;
        println!("  JSON report written to {}", path.display());
    }
    if cfg.require_complete {
        report.results.check_complete().map_err(|e| anyhow!("incomplete run: {e}"))?;
    }
    Ok(())
}
