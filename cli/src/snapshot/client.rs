//! The reference client of the NIP-AR stable manifest transport: live subscription first, then
//! start, every page in order, verified bodies, completion, and reconciliation with local
//! writes and live events across the local write boundary. A lost answer or a 503 sends the same
//! request again within the capture; a 409, a 503 that outlasts those retries, or a lost live
//! socket starts the whole capture over with bounded exponential backoff.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use buzz_core::nipar::KIND_REVISION as KIND;
use buzz_core::{Event, Keys};
use serde_json::{json, Value};

pub use crate::snapshot::error::SnapshotError;
pub use crate::snapshot::fetch::RequestRetry;
use crate::snapshot::fetch::{bodies, call, manifest, Manifest};
use crate::snapshot::http::Relay;
pub use crate::snapshot::http::Target;
use crate::snapshot::live::{lookup, Live};
pub use crate::snapshot::local::LocalWrites;
pub use crate::snapshot::merge::{verify_body, Entry, Predicates, Reconciler};
pub use crate::snapshot::step::Step;

/// What to capture and how persistently.
pub struct Options {
    /// The relay (WebSocket URL and host).
    pub target: Target,
    /// The reader's key: NIP-42 on the live socket, NIP-98 on every snapshot request.
    pub keys: Keys,
    /// The `artifact: current` query (`{"artifact":"current","#type":[...],...}`).
    pub query: Value,
    /// The caller's acknowledged writes (shared: keep recording while the capture runs). Those
    /// acknowledged after a capture's `start` was sent are never dropped for being absent from
    /// it; those acknowledged before are reflected in it. Their bodies are reused when the
    /// capture names them.
    pub local: LocalWrites,
    /// Retries of one request within a capture (transport error or 503).
    pub request_retry: RequestRetry,
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
            local: LocalWrites::new(),
            request_retry: RequestRetry::default(),
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
    /// Artifacts whose revisions the held `prev` chain could not order, decided by asking the
    /// relay for their current revision (never by timestamp).
    pub resolved: usize,
}

struct Capture {
    entries: Vec<Entry>,
    bodies: Vec<Event>,
    pages: usize,
    /// Local writes recorded, and live events received, before `start` was sent.
    boundary: Boundary,
    live: Vec<Event>,
}

/// The local write boundary of one capture: what the client had, just before `start` was sent.
#[derive(Clone, Copy)]
struct Boundary {
    local: usize,
    live: usize,
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
        let done = match attempt_once(opts, &relay, progress).await {
            Ok(capture) => reconcile(opts, capture, attempt).await,
            Err(e) => Err(e),
        };
        let err = match done {
            Ok(outcome) => return Ok(outcome),
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

/// The completed capture against the local writes and live events on each side of its
/// boundary; artifacts the held chain cannot order are looked up on the relay.
async fn reconcile(opts: &Options, capture: Capture, attempts: u32) -> Result<Outcome, SnapshotError> {
    let mut r = Reconciler::new(Predicates::of(&opts.query));
    for body in capture.bodies {
        r.captured(body);
    }
    for (i, ev) in opts.local.records().into_iter().enumerate() {
        if i < capture.boundary.local {
            r.before_capture(&ev);
        } else {
            r.after_capture(ev);
        }
    }
    let live_events = capture.live.len();
    for (i, ev) in capture.live.into_iter().enumerate() {
        if i < capture.boundary.live {
            r.before_capture(&ev);
        } else {
            r.after_capture(ev);
        }
    }
    let unresolved = r.unresolved();
    for chunk in unresolved.chunks(LOOKUP_CHUNK) {
        let mut filter = opts.query.clone();
        filter["#d"] = json!(chunk);
        filter["limit"] = json!(chunk.len());
        let found = lookup(&opts.target, &opts.keys, &filter).await?;
        for d in chunk {
            let current = found.iter().find(|e| e.kind == KIND && e.tag_value("d") == Some(d.as_str()));
            r.resolve(d, current.cloned());
        }
    }
    let artifacts = r
        .into_current()
        .map_err(|left| SnapshotError::Protocol(format!("{} artifacts left unresolved", left.len())))?;
    Ok(Outcome {
        artifacts,
        captured: capture.entries.len(),
        pages: capture.pages,
        attempts,
        live_events,
        resolved: unresolved.len(),
    })
}

/// `d` values per authoritative lookup REQ.
const LOOKUP_CHUNK: usize = 100;

/// One capture under one live subscription; it comes back only when the socket stayed up from
/// before `start` until after `complete`.
async fn attempt_once(
    opts: &Options,
    relay: &Relay,
    progress: &mut (dyn FnMut(Step) + Send),
) -> Result<Capture, SnapshotError> {
    let retry = &opts.request_retry;
    let live = Live::open(&opts.target, &opts.keys, &opts.query, opts.live_counter.clone()).await?;
    // The boundary is read before `start` is sent: whatever was acknowledged or received by
    // then was stored before the capture froze its scope.
    let boundary = Boundary { local: opts.local.len(), live: live.received() };
    let Manifest { token, entries, pages } = manifest(relay, retry, &opts.query, &live, progress).await?;
    let mut held = opts.local.records();
    held.extend(live.events());
    let bodies = bodies(relay, retry, &token, &entries, &held, &live, progress).await?;
    live.check()?;
    let complete = json!({"artifact": "snapshot", "action": "complete", "token": token});
    let done = call(relay, retry, complete, progress).await?;
    if done["complete"] != true {
        return Err(SnapshotError::Protocol(format!("complete answered {done}")));
    }
    live.check()?;
    progress(Step::Completed);
    Ok(Capture { entries, bodies, pages, boundary, live: live.events() })
}
