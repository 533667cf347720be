//! A streamed REQ/COUNT over the bus: request to the query-service with a private inbox, frames
//! checked for order, each handed to the socket's loop.

use buzz_bus::retry::Retry;
use buzz_bus::{BusError, ErrorCode, QueryFrame, QueryFrameBody, QueryKind, QueryRequest};
use futures::StreamExt;
use tokio::sync::mpsc;

/// Whose answer a query task carries back to its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticket {
    /// A COUNT: answered once, no subscription.
    Count,
    /// The REQ that opened subscription generation `generation`; its answer is stale once the
    /// subscription id was closed or reused.
    Page { generation: u64 },
}

impl Ticket {
    /// The query kind the request asks the query-service for.
    #[must_use]
    pub fn kind(self) -> QueryKind {
        match self {
            Self::Count => QueryKind::Count,
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

/// Runs `req` (its `kind` must be `ticket.kind()`) and reports to `tx`. `Done.result` is the
/// count of a COUNT, the end of a REQ, or the error that ended it (a gap in frames or a timeout is
/// an error: an incomplete answer is never presented as complete). A query replica that sends no
/// first frame within `retry.first` is asked again (`buzz_bus::retry::open_stream`); once frames
/// flow, each must follow within `retry.total`.
pub async fn run(
    nats: async_nats::Client,
    subject: String,
    req: QueryRequest,
    sub_id: String,
    ticket: Ticket,
    retry: Retry,
    tx: mpsc::Sender<QueryUpdate>,
) {
    debug_assert_eq!(req.kind, ticket.kind());
    let result = stream(&nats, subject, &req, &sub_id, ticket, retry, &tx).await;
    let _ = tx.send(QueryUpdate::Done { sub_id, ticket, result }).await;
}

async fn stream(
    nats: &async_nats::Client,
    subject: String,
    req: &QueryRequest,
    sub_id: &str,
    ticket: Ticket,
    retry: Retry,
    tx: &mpsc::Sender<QueryUpdate>,
) -> Result<Answered, BusError> {
    let (mut replies, first) = buzz_bus::retry::open_stream(nats, subject, req, retry).await?;
    let mut next = Some(first);
    let mut expected = 0u32;
    let mut received = 0u64;
    loop {
        let msg = match next.take() {
            Some(m) => m,
            None => match tokio::time::timeout(retry.total, replies.next()).await {
                Ok(Some(m)) => m,
                Ok(None) => return Err(BusError::unavailable("the bus is unavailable")),
                Err(_) => {
                    return Err(BusError::new(ErrorCode::Timeout, "the query did not complete in time"))
                }
            },
        };
        let frame: QueryFrame = serde_json::from_slice(&msg.payload).map_err(|_| BusError::internal())?;
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
