//! The distributed load tester: one coordinator and N workers that meet over NATS under a per-run
//! subject prefix. The coordinator prepares the community (members, the load channel), assigns each
//! worker its share of the scenario, starts everyone at one instant, merges the HDR histograms the
//! workers stream back every second, shows progress, and writes the summary, a JSON report and an
//! SVG plot.
//!
//! Layout: `proto` (the messages on the bus), `metrics` (per-operation counters and histograms),
//! `plan` (scenarios and share assignment), `scenarios/` (one module per workload), `worker`,
//! `coordinator`, `timeline` (merging), `summary` (table and JSON), `svg` (the plot).

mod args;
mod audit;
mod check;
mod check_report;
mod coordinator;
mod fi_check;
mod fi_flip;
mod integrity;
mod metrics;
mod plan;
mod proto;
mod reads;
mod scenarios;
mod session;
mod summary;
mod svg;
mod timeline;
mod verdict;
mod worker;

use std::process::ExitCode;

use clap::Parser;

pub use args::{CoordinatorArgs, WorkerArgs};
pub use check::check_main;
pub use coordinator::run_coordinator;
pub use fi_flip::fi_issuers_main;
pub use summary::DistReport;
pub use worker::run_worker;

/// `buzz-load coordinator ...`: exit 0 on a finished run, 1 when the run failed, 2 on bad flags.
pub fn coordinator_main(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args = match CoordinatorArgs::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => return clap_exit(&e),
    };
    let plan = match args.validate() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("buzz-load coordinator: {e:#}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("buzz-load coordinator: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(run_coordinator(&args, plan));
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(report) if report.failed_workers == 0 => ExitCode::SUCCESS,
        Ok(report) => {
            eprintln!("buzz-load coordinator: {} worker(s) did not finish", report.failed_workers);
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("buzz-load coordinator: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `buzz-load worker ...`: exit 0 when the run finished, 1 on failure, 2 on bad flags.
pub fn worker_main(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args = match WorkerArgs::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => return clap_exit(&e),
    };
    if let Err(e) = args.validate() {
        eprintln!("buzz-load worker: {e:#}");
        return ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("buzz-load worker: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(run_worker(&args));
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("buzz-load worker: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Prints a clap error (or help/version) and picks its exit code: 0 for help, 2 for bad flags.
fn clap_exit(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    if e.use_stderr() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}
