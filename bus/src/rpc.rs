//! Request/reply over NATS with JSON bodies and trace context in headers.

use std::time::Duration;

use serde::{de::DeserializeOwned, Serialize};

use crate::error::{BusError, ErrorCode};
use crate::trace;

/// Sends `body` to `subject` and decodes the JSON reply. Timeouts and missing responders become
/// `Unavailable`/`Timeout` bus errors, never panics. Timed in `buzz_bus_request_seconds`.
pub async fn request<T: Serialize, R: DeserializeOwned>(
    client: &async_nats::Client,
    subject: String,
    body: &T,
    timeout: Duration,
) -> Result<R, BusError> {
    let started = std::time::Instant::now();
    let result = request_once(client, subject.clone(), body, timeout).await;
    crate::latency::record(&subject, started, &result);
    result
}

async fn request_once<T: Serialize, R: DeserializeOwned>(
    client: &async_nats::Client,
    subject: String,
    body: &T,
    timeout: Duration,
) -> Result<R, BusError> {
    let payload = serde_json::to_vec(body).map_err(|_| BusError::internal())?;
    let req = async_nats::Request::new()
        .payload(payload.into())
        .headers(trace::current_headers())
        .timeout(Some(timeout));
    match client.send_request(subject.clone(), req).await {
        Ok(msg) => serde_json::from_slice(&msg.payload).map_err(|e| {
            tracing::error!(%subject, error = %e, "undecodable bus reply");
            BusError::internal()
        }),
        Err(e) => {
            use async_nats::RequestErrorKind as K;
            match e.kind() {
                K::TimedOut => Err(BusError::new(ErrorCode::Timeout, "the service did not answer in time")),
                K::NoResponders => Err(BusError::unavailable("no service is available")),
                _ => {
                    tracing::error!(%subject, error = %e, "bus request failed");
                    Err(BusError::unavailable(buzz_core::refusal::BUS_UNAVAILABLE))
                }
            }
        }
    }
}

/// Publishes a JSON reply to `reply` (when the request had one). The body is serialised before
/// the returned future runs, so it need not live across the await.
pub fn reply<T: Serialize>(
    client: &async_nats::Client,
    reply: Option<&async_nats::Subject>,
    body: &T,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    publish_reply(client, reply, body, None)
}

/// [`reply`] naming the replica that answers (header [`crate::retry::INSTANCE_HEADER`]), so that
/// a requester can send its retries straight to a replica that answers (see `retry`).
pub fn reply_from<T: Serialize>(
    client: &async_nats::Client,
    reply: Option<&async_nats::Subject>,
    body: &T,
    instance: &str,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(crate::retry::INSTANCE_HEADER, instance);
    publish_reply(client, reply, body, Some(headers))
}

/// Tells a requester that asked for it (`retry::ACK_HEADER`) that `instance` took its request
/// and is working on it: an empty message before the answer.
pub async fn ack(client: &async_nats::Client, reply: Option<&async_nats::Subject>, instance: &str) {
    let Some(reply) = reply else { return };
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(crate::retry::ACK_HEADER, "1");
    headers.insert(crate::retry::INSTANCE_HEADER, instance);
    if let Err(e) = client.publish_with_headers(reply.clone(), headers, bytes::Bytes::new()).await {
        tracing::warn!(error = %e, "bus ack failed");
    }
}

fn publish_reply<T: Serialize>(
    client: &async_nats::Client,
    reply: Option<&async_nats::Subject>,
    body: &T,
    headers: Option<async_nats::HeaderMap>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let bytes = serde_json::to_vec(body);
    let client = client.clone();
    let reply = reply.cloned();
    async move {
        let Some(reply) = reply else { return };
        let bytes = match bytes {
            Ok(bytes) => bytes,
            Err(e) => return tracing::error!(error = %e, "unserialisable bus reply"),
        };
        let sent = match headers {
            Some(h) => client.publish_with_headers(reply, h, bytes.into()).await,
            None => client.publish(reply, bytes.into()).await,
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "bus reply failed");
        }
    }
}
