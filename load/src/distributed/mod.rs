//! The distributed tester: one coordinator and N workers that meet over NATS under a per-run
//! subject prefix. The coordinator prepares the community (members, the load channel), assigns
//! each worker its share of the scenario, starts everyone at one instant, merges the HDR
//! histograms the workers stream back every second, shows progress, and writes the summary, a
//! JSON report and an SVG plot. `check` judges a run's audit trail against the database; `proxy`
//! is the fault suite's controllable TCP link.
//!
//! Layout: `coordinator/` (`buzz-load coordinator`, and `fi-issuers`), `worker/` (`buzz-load
//! worker`, one module per workload under `scenarios/`), `check/` (`buzz-load check`), `proxy`
//! (`buzz-load proxy`); what coordinator and workers share: `plan` (scenarios and shares), `proto`
//! (the messages on the bus), `metrics` (per-operation counters and histograms), `audit` (the
//! audit trail), `members` (the run's member keys), `clock` (the wall clock they share).

mod audit;
pub(crate) mod check;
mod clock;
pub(crate) mod coordinator;
mod members;
mod metrics;
mod plan;
mod proto;
pub mod proxy;
pub(crate) mod worker;

pub use coordinator::args::CoordinatorArgs;
pub use coordinator::run_coordinator;
pub use coordinator::summary::DistReport;
