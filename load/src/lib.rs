//! `buzz-load`: a bounded load generator for buzz-relay and other Nostr relays, in two parts over
//! a few shared modules.
//!
//! - [`single`]: the one-process tool (`buzz-load [FLAGS]`): publishers and subscribers on one
//!   channel, one report.
//! - [`distributed`]: the distributed tester (`buzz-load coordinator|worker|check|proxy|fi-issuers`):
//!   a coordinator and workers meeting over NATS, the checker of their audit, the fault suite's
//!   TCP proxy.
//! - Shared: [`cli`] (the command line, parsed once), `flags` (flag groups both parts flatten),
//!   `process` (runtime and exit codes), `client` (one WebSocket connection), `nostr` (messages
//!   and events), `nip98` (signed HTTP), `latency` (histograms and counters).

mod cli;
mod client;
pub mod distributed;
mod flags;
mod latency;
mod nip98;
mod nostr;
mod process;
mod single;

pub use cli::run;

/// The `buzz-load` binary: [`run`] over this process's arguments.
#[must_use]
pub fn main() -> std::process::ExitCode {
    run(std::env::args_os())
}
