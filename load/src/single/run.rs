//! Orchestrates one run: setup, subscribers to EOSE, publishers connected, the send window, the
//! drain, and the report.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use buzz_core::Keys;
use futures::future::join_all;
use tokio::sync::watch;

use crate::client::Conn;
use crate::flags::Target;
use crate::latency::Reasons;
use crate::nostr;
use crate::single::config::{Config, Mode};
use crate::single::publisher::{self, PublisherPlan};
use crate::single::report::{Params, Report, Results, SetupInfo};
use crate::single::setup::{self, BuzzSetup};
use crate::single::stats::{PublisherStats, SendLog, SubscriberStats};
use crate::single::subscriber;

/// Gap between "everyone connected" and the first send, so all publishers start together.
const START_DELAY: Duration = Duration::from_millis(50);

fn target(cfg: &Config, i: usize) -> &Target {
    &cfg.targets[i % cfg.targets.len()]
}

/// Connects and, in buzz mode, authenticates as `keys`.
async fn open(cfg: &Config, t: &Target, keys: Option<&Keys>) -> Result<Conn> {
    let mut conn = Conn::connect(t, cfg.connect_timeout).await?;
    if cfg.mode == Mode::Buzz {
        let keys = keys.context("no key for this connection")?;
        conn.authenticate(keys, cfg.connect_timeout).await.with_context(|| format!("AUTH on {}", t.url))?;
    }
    Ok(conn)
}

async fn open_subscriber(
    cfg: &Config,
    i: usize,
    keys: Option<&Keys>,
    channel: &str,
    since: i64,
) -> Result<(Conn, u64)> {
    let mut conn = open(cfg, target(cfg, i), keys).await?;
    let stored = conn.subscribe(channel, since, cfg.connect_timeout).await?;
    Ok((conn, stored))
}

/// Splits `total` over `n` connections as evenly as possible.
#[must_use]
pub fn quota(total: Option<u64>, n: usize, i: usize) -> Option<u64> {
    let n = n as u64;
    total.map(|t| t / n + u64::from((i as u64) < t % n))
}

pub async fn run(cfg: &Config) -> Result<Report> {
    let pub_keys: Vec<Keys> = (0..cfg.publishers).map(|_| Keys::generate()).collect();
    let sub_keys: Vec<Keys> = match cfg.mode {
        Mode::Buzz => (0..cfg.subscribers).map(|_| Keys::generate()).collect(),
        Mode::Plain => Vec::new(),
    };
    let (channel, buzz) = prepare(cfg, &pub_keys, &sub_keys).await?;
    let mut setup_errors = Reasons::default();
    let (sub_conns, stored_before_eose) = open_subscribers(cfg, &sub_keys, &channel, &mut setup_errors).await;
    let pub_conns = open_publishers(cfg, &pub_keys, &mut setup_errors).await;
    if pub_conns.is_empty() {
        let why: Vec<String> = setup_errors.first.iter().map(|(r, n)| format!("{n} × {r}")).collect();
        bail!("no publisher connection could be opened: {}", why.join("; "));
    }

    let n = pub_conns.len();
    let subscribers_connected = sub_conns.len();
    let log = Arc::new(SendLog::default());
    let delivered = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let sub_tasks: Vec<_> = sub_conns
        .into_iter()
        .map(|c| tokio::spawn(subscriber::run(c, log.clone(), delivered.clone(), stop_rx.clone())))
        .collect();
    let start = Instant::now() + START_DELAY;
    let pubs = publish(cfg, pub_conns, &channel, start, &log).await;

    // Drain: wait until every accepted event reached every subscriber, or the drain timeout.
    let expected = pubs.accepted * subscribers_connected as u64;
    let drain_end = Instant::now() + cfg.drain_timeout;
    while delivered.load(Ordering::Relaxed) < expected && Instant::now() < drain_end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = stop_tx.send(true);
    let subs = stop_subscribers(sub_tasks).await;

    Ok(Report {
        params: Params::from(cfg),
        setup: SetupInfo {
            channel,
            publishers_connected: n,
            subscribers_connected,
            stored_before_eose,
            buzz,
            errors: setup_errors,
        },
        results: Results::compute(start, &pubs, &subs, subscribers_connected),
    })
}

/// The load channel: a random tag (plain), or, for buzz-relay, the community's new channel once
/// every connection's key is a member.
async fn prepare(cfg: &Config, pub_keys: &[Keys], sub_keys: &[Keys]) -> Result<(String, Option<BuzzSetup>)> {
    match cfg.mode {
        Mode::Plain => Ok((nostr::plain_channel_id(), None)),
        Mode::Buzz => {
            let all: Vec<Keys> = pub_keys.iter().chain(sub_keys).cloned().collect();
            let s = setup::prepare(cfg, &all).await.context("buzz setup")?;
            if let Some(secret) = &s.generated_owner_secret {
                eprintln!("buzz-load: generated community owner key, secret {secret}");
            }
            Ok((s.channel.clone(), Some(s)))
        }
    }
}

/// Opens every subscriber (past EOSE); the ones that failed are counted in `errors`. Returns the
/// open ones and how many stored events they were sent before EOSE.
async fn open_subscribers(
    cfg: &Config,
    sub_keys: &[Keys],
    channel: &str,
    errors: &mut Reasons,
) -> (Vec<Conn>, u64) {
    let since = buzz_core::unix_now();
    let opened =
        join_all((0..cfg.subscribers).map(|i| open_subscriber(cfg, i, sub_keys.get(i), channel, since)))
            .await;
    let mut conns = Vec::new();
    let mut stored_before_eose = 0;
    for r in opened {
        match r {
            Ok((c, stored)) => {
                stored_before_eose += stored;
                conns.push(c);
            }
            Err(e) => errors.add(&format!("subscriber: {e:#}")),
        }
    }
    (conns, stored_before_eose)
}

/// Opens every publisher with its key; the ones that failed are counted in `errors`.
async fn open_publishers(cfg: &Config, pub_keys: &[Keys], errors: &mut Reasons) -> Vec<(Conn, Keys)> {
    let opened = join_all(
        pub_keys
            .iter()
            .enumerate()
            .map(|(i, k)| async move { open(cfg, target(cfg, i), Some(k)).await.map(|c| (c, k.clone())) }),
    )
    .await;
    let mut conns = Vec::new();
    for r in opened {
        match r {
            Ok(c) => conns.push(c),
            Err(e) => errors.add(&format!("publisher: {e:#}")),
        }
    }
    conns
}

/// Runs every publisher from `start` to its end and merges what they counted.
async fn publish(
    cfg: &Config,
    conns: Vec<(Conn, Keys)>,
    channel: &str,
    start: Instant,
    log: &Arc<SendLog>,
) -> PublisherStats {
    let n = conns.len();
    #[allow(clippy::cast_precision_loss)] // connection counts are small
    let interval = cfg.rate.map(|r| Duration::from_secs_f64(n as f64 / r));
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, (conn, keys))| {
            // Paced publishers are staggered over one interval so sends spread evenly.
            let offset = interval.map_or(Duration::ZERO, |g| g.mul_f64(i as f64 / n as f64));
            let plan = PublisherPlan {
                index: i,
                keys,
                channel: channel.to_owned(),
                interval,
                start: start + offset,
                send_deadline: start + cfg.duration,
                quota: quota(cfg.events, n, i),
                in_flight: cfg.in_flight,
                ok_timeout: cfg.ok_timeout,
                drain_timeout: cfg.drain_timeout,
                content_bytes: cfg.content_bytes,
            };
            tokio::spawn(publisher::run(conn, plan, log.clone()))
        })
        .collect();
    let mut pubs = PublisherStats::default();
    for t in tasks {
        match t.await {
            Ok(s) => pubs.merge(&s),
            Err(e) => pubs.errors.add(&format!("publisher task: {e}")),
        }
    }
    pubs
}

/// Waits (3 s each at most) for the subscribers told to stop, and merges what they counted.
async fn stop_subscribers(tasks: Vec<tokio::task::JoinHandle<SubscriberStats>>) -> SubscriberStats {
    let mut subs = SubscriberStats::default();
    for mut t in tasks {
        match tokio::time::timeout(Duration::from_secs(3), &mut t).await {
            Ok(Ok(s)) => subs.merge(&s),
            Ok(Err(e)) => subs.errors.add(&format!("subscriber task: {e}")),
            Err(_) => {
                t.abort();
                subs.errors.add("subscriber task did not stop in time");
            }
        }
    }
    subs
}

#[cfg(test)]
mod tests {
    use super::quota;

    #[test]
    fn quotas_add_up() {
        assert_eq!(quota(None, 3, 0), None);
        let q: Vec<u64> = (0..3).filter_map(|i| quota(Some(10), 3, i)).collect();
        assert_eq!(q, vec![4, 3, 3]);
        let q: Vec<u64> = (0..4).filter_map(|i| quota(Some(2), 4, i)).collect();
        assert_eq!(q, vec![1, 1, 0, 0]);
    }
}
