//! The one-process tool (`buzz-load [FLAGS]`): N publishers and M subscribers on one channel of
//! one relay, a bounded send window and drain, one report.
//!
//! Layout: `config` (flags and the checked configuration), `setup` (buzz-relay: community,
//! members, channel), `run` (one run, start to report), `publisher` / `subscriber` (one loop per
//! connection), `stats` (what they count), `report` (summary and JSON), `mock` (a relay for tests).

pub mod config;
#[cfg(test)]
pub(crate) mod mock;
mod publisher;
mod report;
mod run;
mod setup;
mod stats;
mod subscriber;

use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};

use crate::process;
use config::{Args, Config};

const WHO: &str = "buzz-load";

/// `buzz-load [FLAGS]`: exit 0 after a finished run, 1 when it failed (or, with
/// `--require-complete`, was incomplete), 2 on bad flags.
#[must_use]
pub fn main(args: Args) -> ExitCode {
    let cfg = match Config::try_from(args) {
        Ok(c) => c,
        Err(e) => return process::bad_flags(WHO, &e),
    };
    let deadline = cfg.hard_deadline();
    let bounded = async {
        tokio::time::timeout(deadline, run::run(&cfg))
            .await
            .map_err(|_| anyhow!("run exceeded its hard deadline of {deadline:?}"))?
    };
    match process::block_on(WHO, None, bounded) {
        Ok(result) => process::finished(WHO, result.and_then(|report| finish(&cfg, &report))),
        Err(code) => code,
    }
}

/// Prints the report, writes its JSON where asked, and checks completeness where asked.
fn finish(cfg: &Config, report: &report::Report) -> Result<()> {
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
