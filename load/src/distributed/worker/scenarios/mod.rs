//! One module per workload. Each part is prepared before the window (connections opened,
//! subscriptions past EOSE, seed data written) and then spawned as one task per client.

mod artifacts;
mod fi;
mod listen;
mod queries;
mod snapshot;
mod storm;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::task::JoinHandle;

use crate::client::Conn;
use crate::distributed::plan::{PartKind, PartShare};
use crate::distributed::worker::session::{Ctx, Timing};

/// Connections opened at once while preparing.
const OPEN_CONCURRENCY: usize = 64;

/// A part ready to run.
pub struct Prepared {
    share: PartShare,
    /// Open connections with their global client index (empty for parts that connect per operation).
    conns: Vec<(usize, Conn)>,
    /// Connections that could not be opened.
    pub failed: u64,
}

impl Prepared {
    /// Open connections.
    #[must_use]
    pub fn connected(&self) -> u64 {
        self.conns.len() as u64
    }

    /// The part's name in reports.
    #[must_use]
    pub fn name(&self) -> &'static str {
        part_name(self.share.part.kind)
    }
}

/// The name of a part kind in reports.
#[must_use]
pub fn part_name(kind: PartKind) -> &'static str {
    match kind {
        PartKind::Chat => "chat",
        PartKind::Fanout => "fanout",
        PartKind::Listen => "listen",
        PartKind::Artifacts => "artifacts",
        PartKind::Queries => "queries",
        PartKind::Snapshot => "snapshot",
        PartKind::Storm => "storm",
        PartKind::Idle => "idle",
        PartKind::Fi => "fi",
    }
}

/// Opens the share's connections (all but storm and fi, which connect per operation), subscribes
/// the listeners and writes the seed artifacts of queries and snapshots.
pub async fn prepare(ctx: &Arc<Ctx>, share: PartShare) -> Prepared {
    if matches!(share.part.kind, PartKind::Storm | PartKind::Fi) {
        return Prepared { share, conns: Vec::new(), failed: 0 };
    }
    let kind = share.part.kind;
    let opened: Vec<(usize, anyhow::Result<Conn>)> =
        futures::stream::iter(share.first..share.first + share.clients)
            .map(|g| {
                let ctx = ctx.clone();
                async move {
                    let t0 = std::time::Instant::now();
                    let r = async {
                        let (mut conn, keys) = ctx.connect(g).await?;
                        match kind {
                            PartKind::Listen => listen::subscribe(&ctx, &mut conn, g).await?,
                            PartKind::Queries | PartKind::Snapshot if g == share.first => {
                                artifacts::seed(&ctx, &mut conn, &keys).await?;
                            }
                            _ => {}
                        }
                        if kind == PartKind::Idle {
                            ctx.rec.ok("idle.connect", t0.elapsed());
                        }
                        anyhow::Ok(conn)
                    }
                    .await;
                    (g, r)
                }
            })
            .buffer_unordered(OPEN_CONCURRENCY)
            .collect()
            .await;
    let mut conns = Vec::new();
    let mut failed = 0;
    for (g, r) in opened {
        match r {
            Ok(c) => conns.push((g, c)),
            Err(e) => {
                failed += 1;
                ctx.rec.error(&format!("{}.open", part_name(kind)), &format!("{e:#}"));
                ctx.audit.transport(&format!("{}.open", part_name(kind)), "open", &format!("{e:#}"));
            }
        }
    }
    conns.sort_by_key(|(g, _)| *g);
    Prepared { share, conns, failed }
}

/// Per-client gap of a paced part: clients / rate seconds.
fn gap(share: &PartShare) -> Option<Duration> {
    #[allow(clippy::cast_precision_loss)] // client counts are small
    share.rate.map(|r| Duration::from_secs_f64(share.clients as f64 / r))
}

/// Spawns one task per client of a prepared part.
pub fn spawn(ctx: &Arc<Ctx>, p: Prepared, timing: Timing) -> Vec<JoinHandle<()>> {
    let share = p.share;
    let gap = gap(&share);
    let think = Duration::from_millis(share.part.think_ms);
    let n = share.clients.max(1);
    let offset = |i: usize| {
        #[allow(clippy::cast_precision_loss)] // client counts are small
        gap.map_or(Duration::ZERO, |g| g.mul_f64(i as f64 / n as f64))
    };
    match share.part.kind {
        PartKind::Storm => (0..share.clients)
            .map(|i| {
                let ctx = ctx.clone();
                let g = share.first + i;
                let start = timing.start + offset(i);
                tokio::spawn(async move { storm::run(ctx, g, Timing { start, ..timing }, gap, think).await })
            })
            .collect(),
        PartKind::Fi => (0..share.clients)
            .map(|i| {
                let ctx = ctx.clone();
                let g = share.first + i;
                tokio::spawn(async move { fi::run(ctx, g, timing, think).await })
            })
            .collect(),
        kind => p
            .conns
            .into_iter()
            .enumerate()
            .map(|(i, (g, conn))| {
                let ctx = ctx.clone();
                let t = Timing { start: timing.start + offset(i), ..timing };
                match kind {
                    PartKind::Chat | PartKind::Fanout => {
                        let op = if kind == PartKind::Chat { "chat" } else { "fanout.publish" };
                        let w = writer::Writer { g, op, gap, think };
                        tokio::spawn(async move { w.run(ctx, conn, t).await })
                    }
                    PartKind::Listen => tokio::spawn(async move { listen::run(ctx, conn, g, t).await }),
                    PartKind::Artifacts => {
                        tokio::spawn(async move { artifacts::run(ctx, conn, g, t, think).await })
                    }
                    PartKind::Queries => {
                        tokio::spawn(async move { queries::run(ctx, conn, g, t, think).await })
                    }
                    PartKind::Snapshot => {
                        tokio::spawn(async move { snapshot::run(ctx, conn, g, t, think).await })
                    }
                    PartKind::Idle | PartKind::Storm | PartKind::Fi => {
                        tokio::spawn(async move { storm::hold(ctx, conn, t).await })
                    }
                }
            })
            .collect(),
    }
}
