//! The reference client of the NIP-AR stable manifest transport: live subscription first, then
//! start, every page in order, verified bodies, completion, and reconciliation with local
//! records and live events. A 409/503 or a lost live socket starts the whole capture over with
//! bounded exponential backoff.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use buzz_core::{Event, Keys};
use serde_json::{json, Value};

pub use crate::snapshot_error::SnapshotError;
use crate::snapshot_fetch::{bodies, manifest, Manifest};
use crate::snapshot_http::Relay;
pub use crate::snapshot_http::Target;
use crate::snapshot_live::Live;
pub use crate::snapshot_merge::{verify_body, Entry, Predicates, Reconciler};
pub use crate::snapshot_step::Step;

/// What to capture and how persistently.
pub struct Options {
    /// The relay (WebSocket URL and host).
    pub target: Target,
    /// The reader's key: NIP-42 on the live socket, NIP-98 on every snapshot request.
    pub keys: Keys,
    /// The `artifact: current` query (`{"artifact":"current","#type":[...],...}`).
    pub query: Value,
    /// Records the caller already holds (its own writes): never dropped for being absent, and
    /// their bodies are reused when the capture names them.
    pub local: Vec<Event>,
    /// Whole captures tried before giving up on 409/503/lost live socket.
    pub max_attempts: u32,
    /// First backoff between attempts; it doubles each time.
    pub backoff_start: Duration,
    /// Largest backoff between attempts.
    pub backoff_max: Duration,
    /// Live events received so far, over every attempt (a progress display may show it).
    pub live_counter: Arc<AtomicUsize>,
}

impl Options {
    /// Defaults: 6 attempts, backoff 200 ms doubling to 5 s.
    #[must_use]
    pub fn new(target: Target, keys: Keys, query: Value) -> Self {
        Self {
            target,
            keys,
            query,
            local: Vec::new(),
            max_attempts: 6,
            backoff_start: Duration::from_millis(200),
            backoff_max: Duration::from_secs(5),
            live_counter: Arc::default(),
        }
    }
}

/// A reconciled snapshot.
#[derive(Debug)]
pub struct Outcome {
    /// Current artifacts, ordered by `d`.
    pub artifacts: Vec<Event>,
    /// Entries in the completed capture.
    pub captured: usize,
    /// Manifest pages fetched in the completed capture.
    pub pages: usize,
    /// Attempts used (1 when the first capture completed).
    pub attempts: u32,
    /// Live events received between the subscription and the completion.
    pub live_events: usize,
}

struct Capture {
    entries: Vec<Entry>,
    bodies: Vec<Event>,
    pages: usize,
}

/// Runs the client algorithm until one capture completes, a non-retryable failure, or
/// `max_attempts` retryable ones.
pub async fn snapshot(
    opts: &Options,
    progress: &mut (dyn FnMut(Step) + Send),
) -> Result<Outcome, SnapshotError> {
    let relay = Relay::new(opts.target.clone(), opts.keys.clone());
    let mut delay = opts.backoff_start;
    let mut attempt = 1;
    loop {
        progress(Step::Attempt(attempt));
        let err = match attempt_once(opts, &relay, progress).await {
            Ok((capture, live)) => return Ok(reconcile(opts, capture, live, attempt)),
            Err(e) if e.retryable() => e,
            Err(e) => return Err(e),
        };
        if attempt >= opts.max_attempts {
            return Err(SnapshotError::GaveUp { attempts: attempt, last: Box::new(err) });
        }
        progress(Step::Retry { attempt, delay, reason: err.to_string() });
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(opts.backoff_max);
        attempt += 1;
    }
}

fn reconcile(opts: &Options, capture: Capture, live: Vec<Event>, attempts: u32) -> Outcome {
    let mut r = Reconciler::new(Predicates::of(&opts.query));
    for body in capture.bodies {
        r.captured(body);
    }
    for ev in &opts.local {
        r.local(ev.clone());
    }
    let live_events = live.len();
    for ev in live {
        r.live(ev);
    }
    Outcome {
        artifacts: r.into_current(),
        captured: capture.entries.len(),
        pages: capture.pages,
        attempts,
        live_events,
    }
}

/// One capture under one live subscription; the live events come back only when the socket
/// stayed up from before `start` until after `complete`.
async fn attempt_once(
    opts: &Options,
    relay: &Relay,
    progress: &mut (dyn FnMut(Step) + Send),
) -> Result<(Capture, Vec<Event>), SnapshotError> {
    let live = Live::open(&opts.target, &opts.keys, &opts.query, opts.live_counter.clone()).await?;
    let Manifest { token, entries, pages } = manifest(relay, &opts.query, &live, progress).await?;
    let bodies = bodies(relay, &token, &entries, &opts.local, &live, progress).await?;
    live.check()?;
    let done = relay.call(json!({"artifact": "snapshot", "action": "complete", "token": token})).await?;
    if done["complete"] != true {
        return Err(SnapshotError::Protocol(format!("complete answered {done}")));
    }
    live.check()?;
    progress(Step::Completed);
    let events = live.events();
    Ok((Capture { entries, bodies, pages }, events))
}
