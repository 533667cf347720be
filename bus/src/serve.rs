//! The subscribe loop shared by bus consumers: queue-subscribe, decode, call the handler on its own
//! task (bounded), reply. Handlers stay plain async functions that tests call directly.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use serde::{de::DeserializeOwned, Serialize};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::BusError;
use crate::{retry, rpc, trace};

/// A message as the handler sees it: the decoded body, and where a streamed answer goes.
pub struct Incoming<Req> {
    /// The decoded request.
    pub body: Req,
    /// The requester's inbox, when there is one.
    pub reply: Option<async_nats::Subject>,
}

/// Serves `subject` in queue group `group` until `shutdown`, running at most `concurrency` handlers
/// at once. Undecodable requests get `Err(BusError::invalid)` as the reply. When `shutdown` fires,
/// in-flight handlers finish before this returns. Each loop also serves its own direct subject
/// (`retry::direct_subject`) and names itself in its replies, so that requesters can retry on a
/// replica known to answer when a request drew a stalled one.
pub async fn serve<Req, Rep, H, Fut>(
    client: async_nats::Client,
    subject: String,
    group: &'static str,
    concurrency: usize,
    shutdown: CancellationToken,
    handler: H,
) -> Result<(), async_nats::SubscribeError>
where
    Req: DeserializeOwned + Send + 'static,
    Rep: Serialize + Send + 'static,
    H: Fn(Incoming<Req>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<Rep>> + Send + 'static,
{
    let mut sub = client.queue_subscribe(subject.clone(), group.to_owned()).await?;
    let instance: Arc<str> = uuid::Uuid::new_v4().simple().to_string().into();
    let mut direct = client.subscribe(retry::direct_subject(&subject, &instance)).await?;
    let limit = Arc::new(Semaphore::new(concurrency));
    let handler = Arc::new(handler);
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let msg = tokio::select! {
            () = shutdown.cancelled() => break,
            m = sub.next() => match m { Some(m) => m, None => break },
            m = direct.next() => match m { Some(m) => m, None => break },
        };
        if retry::given_up(msg.headers.as_ref(), retry::unix_ms()) {
            metrics::counter!("buzz_bus_stale_requests_total", "group" => group).increment(1);
            tracing::warn!(%subject, "request taken after its requester gave up on it; dropped unanswered");
            continue;
        }
        let ack = msg
            .headers
            .as_ref()
            .and_then(|h| h.get(retry::ACK_HEADER))
            .map(|v| v.as_str() == retry::ACK_IF_SLOW);
        if ack == Some(false) {
            // A streamed request: acknowledged as soon as it is taken, before it waits for a
            // handler slot (the requester learns a live replica has it) and before any frame.
            rpc::ack(&client, msg.reply.as_ref(), &instance).await;
        }
        let Ok(permit) = limit.clone().acquire_owned().await else { break };
        let handler = handler.clone();
        let client = client.clone();
        let instance = instance.clone();
        let span = tracing::info_span!("bus.handle", subject = %subject);
        trace::continue_from(msg.headers.as_ref(), &span);
        tasks.spawn(
            async move {
                let _permit = permit;
                match serde_json::from_slice::<Req>(&msg.payload) {
                    Ok(body) => {
                        let reply = msg.reply.clone();
                        let handled = handler(Incoming { body, reply: reply.clone() });
                        let answer = if ack == Some(true) {
                            acknowledged_if_slow(handled, &client, reply.as_ref(), &instance).await
                        } else {
                            handled.await
                        };
                        if let Some(rep) = answer {
                            rpc::reply_from(&client, reply.as_ref(), &rep, &instance).await;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "undecodable bus request");
                        let err: Result<(), BusError> = Err(BusError::invalid("undecodable request"));
                        rpc::reply_from(&client, msg.reply.as_ref(), &err, &instance).await;
                    }
                }
            }
            .instrument(span),
        );
        while tasks.try_join_next().is_some() {}
    }
    let _ = sub.unsubscribe().await;
    let _ = direct.unsubscribe().await;
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// How long a request that asked for an acknowledgement may run before it gets one. A request
/// answered sooner needs none (the answer says the same and more), which saves a message per
/// request; requesters hedge only after `Retry::first` (250 ms by default), well past this.
pub const ACK_AFTER: std::time::Duration = std::time::Duration::from_millis(40);

/// Runs `handled`; when it is still running after [`ACK_AFTER`], acknowledges the request first.
async fn acknowledged_if_slow<F: Future>(
    handled: F,
    client: &async_nats::Client,
    reply: Option<&async_nats::Subject>,
    instance: &str,
) -> F::Output {
    tokio::pin!(handled);
    tokio::select! {
        out = &mut handled => out,
        () = tokio::time::sleep(ACK_AFTER) => {
            rpc::ack(client, reply, instance).await;
            handled.await
        }
    }
}

/// Connects to NATS (moved to [`crate::nats`], kept here for the services that call it by this path).
pub use crate::nats::connect;
