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
use crate::{rpc, trace};

/// A message as the handler sees it: the decoded body, and where a streamed answer goes.
pub struct Incoming<Req> {
    pub body: Req,
    pub reply: Option<async_nats::Subject>,
}

/// Serves `subject` in queue group `group` until `shutdown`, running at most `concurrency` handlers
/// at once. Undecodable requests get `Err(BusError::invalid)` as the reply. When `shutdown` fires,
/// in-flight handlers finish before this returns.
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
    let limit = Arc::new(Semaphore::new(concurrency));
    let handler = Arc::new(handler);
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let msg = tokio::select! {
            () = shutdown.cancelled() => break,
            m = sub.next() => match m { Some(m) => m, None => break },
        };
        let Ok(permit) = limit.clone().acquire_owned().await else { break };
        let handler = handler.clone();
        let client = client.clone();
        let span = tracing::info_span!("bus.handle", subject = %subject);
        trace::continue_from(msg.headers.as_ref(), &span);
        tasks.spawn(
            async move {
                let _permit = permit;
                match serde_json::from_slice::<Req>(&msg.payload) {
                    Ok(body) => {
                        let reply = msg.reply.clone();
                        if let Some(rep) = handler(Incoming { body, reply: reply.clone() }).await {
                            rpc::reply(&client, reply.as_ref(), &rep).await;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "undecodable bus request");
                        let err: Result<(), BusError> = Err(BusError::invalid("undecodable request"));
                        rpc::reply(&client, msg.reply.as_ref(), &err).await;
                    }
                }
            }
            .instrument(span),
        );
        while tasks.try_join_next().is_some() {}
    }
    let _ = sub.unsubscribe().await;
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// Connects to NATS (moved to [`crate::nats`], kept here for the services that call it by this path).
pub use crate::nats::connect;
