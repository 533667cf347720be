//! A streamed REQ/COUNT over the bus: request to the query-service with a private inbox, frames
//! checked for order, each handed to the socket's loop.

use buzz_bus::retry::Retry;
use buzz_bus::{BusError, ErrorCode, QueryFrame, QueryFrameBody, QueryRequest};
use futures::StreamExt;
use tokio::sync::mpsc;

/// What a query task tells its socket.
pub enum QueryUpdate {
    Events { sub_id: String, generation: u64, events: Vec<String> },
    Done { sub_id: String, generation: u64, result: Result<Option<u64>, BusError> },
}

/// Runs `req` and reports to `tx`. `Done.result` is `Ok(Some(count))` for COUNT, `Ok(None)` at
/// the end of a REQ, or the error that ended it (a gap in frames or a timeout is an error: an
/// incomplete answer is never presented as complete). A query replica that sends no first frame
/// within `retry.first` is asked again (`buzz_bus::retry::open_stream`); once frames flow, each
/// must follow within `retry.total`.
pub async fn run(
    nats: async_nats::Client,
    subject: String,
    req: QueryRequest,
    sub_id: String,
    generation: u64,
    retry: Retry,
    tx: mpsc::Sender<QueryUpdate>,
) {
    let result = stream(&nats, subject, &req, &sub_id, generation, retry, &tx).await;
    let _ = tx.send(QueryUpdate::Done { sub_id, generation, result }).await;
}

async fn stream(
    nats: &async_nats::Client,
    subject: String,
    req: &QueryRequest,
    sub_id: &str,
    generation: u64,
    retry: Retry,
    tx: &mpsc::Sender<QueryUpdate>,
) -> Result<Option<u64>, BusError> {
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
                let update = QueryUpdate::Events { sub_id: sub_id.to_owned(), generation, events };
                if tx.send(update).await.is_err() {
                    return Ok(None);
                }
            }
            QueryFrameBody::Done { total } => {
                if total != received {
                    return Err(BusError::unavailable("the query answer was interrupted"));
                }
                return Ok(None);
            }
            QueryFrameBody::Count { count } => return Ok(Some(count)),
            QueryFrameBody::Error { error } => return Err(error),
        }
    }
}
