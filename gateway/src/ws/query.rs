//! A streamed REQ/COUNT over the bus: request to the query-service with a private inbox, frames
//! checked for order, each handed to the socket's loop.

use buzz_bus::retry::Retry;
use buzz_bus::{BusError, ErrorCode, QueryFrame, QueryFrameBody, QueryKind, QueryRequest};
use futures::StreamExt;
use tokio::sync::mpsc;

/// Whose answer a query task carries back to its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ticket {
    /// A COUNT: answered once, no subscription; `serial` tells the socket's COUNTs apart.
    Count { serial: u64 },
    /// The REQ that opened subscription generation `generation`; its answer is stale once the
    /// subscription id was closed or reused.
    Page { generation: u64 },
}

impl Ticket {
    /// The query kind the request asks the query-service for.
    #[must_use]
    pub fn kind(self) -> QueryKind {
        match self {
            Self::Count { .. } => QueryKind::Count,
            Self::Page { .. } => QueryKind::Page,
        }
    }
}

/// How a query ended without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// A COUNT's number.
    Count(u64),
    /// Every event of a REQ was delivered (or the receiver went away).
    End,
}

/// What a query task tells its socket.
pub enum QueryUpdate {
    Events { sub_id: String, ticket: Ticket, events: Vec<String> },
    Done { sub_id: String, ticket: Ticket, result: Result<Answered, BusError> },
}

/// Where queries go on the bus.
#[derive(Clone)]
pub struct QueryBus {
    /// The gateway's NATS connection.
    pub nats: async_nats::Client,
    /// `<p>.v1.query`.
    pub subject: String,
    /// `<p>.v1.query.cancel`.
    pub cancel_subject: String,
    /// When to ask another replica, and the deadline of the whole answer.
    pub retry: Retry,
}

impl QueryBus {
    /// The query subjects of `state`'s bus.
    #[must_use]
    pub fn of(state: &crate::state::AppState) -> Self {
        Self {
            nats: state.nats.client().clone(),
            subject: state.subjects.query(),
            cancel_subject: state.subjects.query_cancel(),
            retry: state.settings.bus_retry(),
        }
    }
}

/// Tells the query-services to stop a query when dropped before its answer ended: the task was
/// aborted (socket closed, subscription closed or replaced), its receiver went away, or it gave up
/// waiting. Disarmed once the query-service sent its last frame.
struct CancelOnDrop<'a> {
    bus: &'a QueryBus,
    query_id: uuid::Uuid,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        metrics::counter!("buzz_gateway_queries_cancelled_total").increment(1);
        let body = buzz_bus::QueryCancel { query_ids: vec![self.query_id] };
        let Ok(bytes) = serde_json::to_vec(&body) else { return };
        let (nats, subject) = (self.bus.nats.clone(), self.bus.cancel_subject.clone());
        // Publishing only queues the message on the connection; it needs no reply.
        tokio::spawn(async move {
            if let Err(e) = nats.publish(subject, bytes.into()).await {
                tracing::warn!(error = %e, "query cancel publish failed");
            }
        });
    }
}

/// Runs `req` (its `kind` must be `ticket.kind()`) and reports to `tx`. `Done.result` is the
/// count of a COUNT, the end of a REQ, or the error that ended it (a gap in frames or a timeout is
/// an error: an incomplete answer is never presented as complete). A query replica that sends no
/// first frame within `retry.first` is asked again (`buzz_bus::retry::open_stream`); once frames
/// flow, each must follow within `retry.total`. The request carries a fresh `query_id`; when the
/// task ends before the answer does (dropped, or its receiver gone), the query is cancelled.
pub async fn run(
    bus: QueryBus,
    mut req: QueryRequest,
    sub_id: String,
    ticket: Ticket,
    tx: mpsc::Sender<QueryUpdate>,
) {
    debug_assert_eq!(req.kind, ticket.kind());
    let query_id = uuid::Uuid::new_v4();
    req.query_id = Some(query_id);
    let mut guard = CancelOnDrop { bus: &bus, query_id, armed: true };
    let result = stream(&bus, &req, &sub_id, ticket, &tx, &mut guard.armed).await;
    drop(guard);
    let _ = tx.send(QueryUpdate::Done { sub_id, ticket, result }).await;
}

async fn stream(
    bus: &QueryBus,
    req: &QueryRequest,
    sub_id: &str,
    ticket: Ticket,
    tx: &mpsc::Sender<QueryUpdate>,
    unfinished: &mut bool,
) -> Result<Answered, BusError> {
    let (mut replies, first) =
        buzz_bus::retry::open_stream(&bus.nats, bus.subject.clone(), req, bus.retry).await?;
    let retry = bus.retry;
    let mut next = Some(first);
    let mut expected = 0u32;
    let mut received = 0u64;
    loop {
        let msg = match next.take() {
            Some(m) => m,
            None => match tokio::time::timeout(retry.total, replies.next()).await {
                Ok(Some(m)) => m,
                Ok(None) => return Err(BusError::unavailable(buzz_core::refusal::BUS_UNAVAILABLE)),
                Err(_) => return Err(BusError::new(ErrorCode::Timeout, buzz_core::refusal::QUERY_TIMEOUT)),
            },
        };
        let frame: QueryFrame = serde_json::from_slice(&msg.payload).map_err(|_| BusError::internal())?;
        if !matches!(frame.body, QueryFrameBody::Events { .. }) {
            // The query-service's last frame: nothing is left to cancel.
            *unfinished = false;
        }
        if frame.seq != expected {
            return Err(BusError::unavailable("the query answer was interrupted"));
        }
        expected += 1;
        match frame.body {
            QueryFrameBody::Events { events } => {
                received += events.len() as u64;
                let update = QueryUpdate::Events { sub_id: sub_id.to_owned(), ticket, events };
                if tx.send(update).await.is_err() {
                    return Ok(Answered::End);
                }
            }
            QueryFrameBody::Done { total } => {
                if total != received {
                    return Err(BusError::unavailable("the query answer was interrupted"));
                }
                return Ok(Answered::End);
            }
            QueryFrameBody::Count { count } => return Ok(Answered::Count(count)),
            QueryFrameBody::Error { error } => return Err(error),
        }
    }
}
