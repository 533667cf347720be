//! The coordinator's side of one run's subjects: its inbox (everything the workers say) and
//! messages to one worker or to all.

use anyhow::{Context, Result};
use futures::StreamExt;

use crate::distributed::proto::{self, ToWorker};

/// A run's bus, as the coordinator holds it.
pub struct Bus {
    nats: async_nats::Client,
    run_id: String,
    /// What the workers say (one subject, so each worker's messages stay in order).
    inbox: async_nats::Subscriber,
}

impl Bus {
    /// Connects to `url` and listens on the run's coordinator subject.
    pub async fn connect(url: &str, run_id: &str) -> Result<Self> {
        let nats = proto::connect(url).await?;
        let inbox = nats.subscribe(proto::coord_subject(run_id)).await?;
        Ok(Self { nats, run_id: run_id.to_owned(), inbox })
    }

    /// Sends `m` to `worker` alone.
    pub async fn to_worker(&self, worker: &str, m: &ToWorker) -> Result<()> {
        self.nats.publish(proto::worker_subject(&self.run_id, worker), proto::encode(m)?).await?;
        Ok(())
    }

    /// Sends `m` to every worker.
    pub async fn to_all(&self, m: &ToWorker) -> Result<()> {
        self.nats.publish(proto::all_subject(&self.run_id), proto::encode(m)?).await?;
        Ok(())
    }

    /// The next message's payload; `None` when the subscription ended.
    pub async fn next(&mut self) -> Option<bytes::Bytes> {
        self.inbox.next().await.map(|m| m.payload)
    }

    /// The next message's payload before `deadline`: `Ok(None)` when the deadline passed first,
    /// an error when the subscription ended.
    pub async fn next_by(&mut self, deadline: tokio::time::Instant) -> Result<Option<bytes::Bytes>> {
        match tokio::time::timeout_at(deadline, self.inbox.next()).await {
            Err(_) => Ok(None),
            Ok(m) => Ok(Some(m.context("NATS subscription ended")?.payload)),
        }
    }
}
