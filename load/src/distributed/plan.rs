//! Scenarios, their parts (kinds of client), and how a run is split over workers.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::flags::Target;

/// A workload the coordinator can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// Kind-9 chat ingest: closed-loop publishers (optionally paced), optional subscribers.
    Chat,
    /// One paced writer, many subscribers spread over the gateways: delivery latency.
    Fanout,
    /// NIP-AR create/update chains with a share of deliberately stale updates.
    Artifacts,
    /// Current-state artifact queries (REQ → EOSE).
    Queries,
    /// Snapshot captures over signed `POST /query` (start, pages, complete).
    Snapshot,
    /// A connection storm: connect + NIP-42 AUTH + close, as fast as allowed or paced.
    Storm,
    /// Authenticated sockets held open and idle for the window.
    Idle,
    /// A mixed team workday: chat, artifacts, queries, snapshots, reconnects, with think times.
    Workday,
}

/// The kind of one client loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartKind {
    /// Publishes kind-9 events (`chat`).
    Chat,
    /// The fan-out writer (`fanout.publish`).
    Fanout,
    /// Subscribes to the load channel and times deliveries (`delivery`).
    Listen,
    /// Artifact chains (`artifact.create`, `artifact.update`, `artifact.stale`).
    Artifacts,
    /// Current-state queries (`query.current`).
    Queries,
    /// Snapshot captures (`snapshot.capture`).
    Snapshot,
    /// Connect + AUTH + close (`storm.connect`).
    Storm,
    /// Idle authenticated sockets (`idle.connect`).
    Idle,
    /// NIP-FI sockets, FI-admitted and plain, on a second community whose requirement the
    /// coordinator flips (`fi.fi`, `fi.plain`; see `scenarios::fi`).
    Fi,
}

/// One kind of client in a run: how many, at what total rate, with what pause between operations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// What the clients do.
    pub kind: PartKind,
    /// Clients over all workers.
    pub clients: usize,
    /// Total operations/s over all clients of this part; `None` = closed loop.
    pub rate: Option<f64>,
    /// Pause after each operation, per client (workday think time), in milliseconds.
    pub think_ms: u64,
}

/// Knobs every worker needs, the same for all.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Knobs {
    /// chat: EVENTs awaiting OK per connection.
    pub in_flight: usize,
    /// artifacts: updates per create.
    pub chain: usize,
    /// artifacts: share of updates sent with a stale `prev`.
    pub conflict_share: f64,
    /// queries/snapshot: artifacts each worker creates before the window.
    pub seed_artifacts: usize,
    /// snapshot: member keys each capturing client takes turns with (the relay allows two live
    /// captures per reader); 0 or 1 = its own key only.
    #[serde(default)]
    pub snapshot_readers: usize,
}

/// Client weights of the workday profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weights {
    /// Chat publishers.
    pub chat: u32,
    /// Artifact editors.
    pub artifacts: u32,
    /// Current-state readers.
    pub queries: u32,
    /// Snapshot capturers.
    pub snapshot: u32,
    /// Reconnecting clients.
    pub storm: u32,
    /// NIP-FI socket clients (0 = the part is off).
    pub fi: u32,
}

impl Weights {
    /// Parses `name=weight,...`; names missing from the list weigh 0.
    pub fn parse(text: &str) -> Result<Self> {
        let mut w = Self { chat: 0, artifacts: 0, queries: 0, snapshot: 0, storm: 0, fi: 0 };
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) =
                item.split_once('=').with_context(|| format!("--weights: {item:?} is not name=N"))?;
            let value: u32 =
                value.trim().parse().with_context(|| format!("--weights: bad weight in {item:?}"))?;
            let slot = match name.trim() {
                "chat" => &mut w.chat,
                "artifacts" => &mut w.artifacts,
                "queries" => &mut w.queries,
                "snapshot" => &mut w.snapshot,
                "storm" => &mut w.storm,
                "fi" => &mut w.fi,
                other => {
                    bail!("--weights: unknown part {other:?} (chat, artifacts, queries, snapshot, storm, fi)")
                }
            };
            *slot = value;
        }
        if w.total() == 0 {
            bail!("--weights: at least one weight must be positive");
        }
        Ok(w)
    }

    fn total(self) -> u64 {
        [self.chat, self.artifacts, self.queries, self.snapshot, self.storm, self.fi]
            .iter()
            .map(|&x| u64::from(x))
            .sum()
    }

    /// `clients` split by weight (largest remainders), with think times of a human team.
    #[must_use]
    pub fn parts(self, clients: usize) -> Vec<Part> {
        let list = [
            (PartKind::Chat, self.chat, 1_000),
            (PartKind::Artifacts, self.artifacts, 2_000),
            (PartKind::Queries, self.queries, 2_000),
            (PartKind::Snapshot, self.snapshot, 5_000),
            (PartKind::Storm, self.storm, 3_000),
            (PartKind::Fi, self.fi, 3_000),
        ];
        let total = self.total().max(1);
        let c = clients as u64;
        let mut counts: Vec<u64> = list.iter().map(|&(_, w, _)| c * u64::from(w) / total).collect();
        let mut left = c - counts.iter().sum::<u64>();
        // Hand the rest out in list order to positive weights.
        for (i, &(_, w, _)) in list.iter().enumerate().cycle().take(list.len() * 2) {
            if left == 0 {
                break;
            }
            if w > 0 {
                counts[i] += 1;
                left -= 1;
            }
        }
        list.iter()
            .zip(counts)
            .filter(|(_, n)| *n > 0)
            .map(|(&(kind, _, think_ms), n)| Part {
                kind,
                clients: usize::try_from(n).unwrap_or(usize::MAX),
                rate: None,
                think_ms,
            })
            .collect()
    }
}

/// A validated run: where, what, how long.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The scenario named on the command line.
    pub scenario: Scenario,
    /// Gateways (connections go round-robin by global client index).
    pub targets: Vec<Target>,
    /// The client kinds of the run.
    pub parts: Vec<Part>,
    /// Shared knobs.
    pub knobs: Knobs,
    /// Measured window.
    pub duration: Duration,
    /// Drain after the window.
    pub drain: Duration,
    /// Connect/AUTH/EOSE/HTTP timeout.
    pub connect_timeout: Duration,
}

impl Plan {
    /// Connections over all parts (one key each, up to the member cap).
    #[must_use]
    pub fn connections(&self) -> usize {
        self.parts.iter().map(|p| p.clients).sum()
    }
}

/// One worker's slice of one part.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PartShare {
    /// The part (its totals).
    pub part: Part,
    /// Clients this worker runs.
    pub clients: usize,
    /// Global index of this worker's first client of this run (keys and gateways follow it).
    pub first: usize,
    /// This worker's share of the part's rate.
    pub rate: Option<f64>,
}

/// Splits `total` over `n` as evenly as possible; the first `total % n` get one more.
#[must_use]
pub fn split(total: usize, n: usize, i: usize) -> usize {
    if n == 0 {
        return 0;
    }
    total / n + usize::from(i < total % n)
}

/// The shares of worker `i` of `n`: every part split evenly, global client indexes consecutive
/// over parts and workers, rates in proportion to clients.
#[must_use]
pub fn assign(plan: &Plan, n: usize, i: usize) -> Vec<PartShare> {
    let mut base = 0;
    let mut out = Vec::new();
    for part in &plan.parts {
        let before: usize = (0..i).map(|j| split(part.clients, n, j)).sum();
        let clients = split(part.clients, n, i);
        #[allow(clippy::cast_precision_loss)] // client counts are small
        let rate = part.rate.map(|r| r * clients as f64 / part.clients.max(1) as f64);
        if clients > 0 {
            out.push(PartShare { part: *part, clients, first: base + before, rate });
        }
        base += part.clients;
    }
    out
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
