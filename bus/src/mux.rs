//! Requests multiplexed on one reply subscription per connection.
//!
//! A request that subscribed to an inbox of its own would cost the connection a `SUB` and an
//! `UNSUB` and the server an interest change for every request. Here every request of a
//! connection replies to `<prefix>.<token>` under one wildcard subscription (`<prefix>.*`), made
//! once; a router hands each reply (acknowledgements included, and several answers to one hedged
//! request) to the request that owns the token. Requests are independent and in flight together.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use tokio::sync::{mpsc, OnceCell};

type Routes = Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<async_nats::Message>>>>;

/// A NATS connection with its request multiplexer. Dereferences to the client, so it is used
/// wherever the client is; cheap to clone (clones share the multiplexer).
#[derive(Clone)]
pub struct Bus {
    client: async_nats::Client,
    mux: Arc<Mux>,
}

struct Mux {
    prefix: String,
    routes: Routes,
    next: AtomicU64,
    started: OnceCell<()>,
}

impl Bus {
    /// Wraps `client`; the reply subscription is made on the first request.
    #[must_use]
    pub fn new(client: async_nats::Client) -> Self {
        let prefix = client.new_inbox();
        let mux = Mux { prefix, routes: Arc::default(), next: AtomicU64::new(1), started: OnceCell::new() };
        Self { client, mux: Arc::new(mux) }
    }

    /// The underlying client.
    #[must_use]
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// A reply inbox of its own for one request, and the replies sent to it. The inbox is
    /// released when the returned [`Replies`] is dropped.
    pub async fn inbox(&self) -> Result<Replies, async_nats::SubscribeError> {
        self.mux
            .started
            .get_or_try_init(|| async {
                let sub = self.client.subscribe(format!("{}.*", self.mux.prefix)).await?;
                tokio::spawn(route(sub, self.mux.routes.clone()));
                Ok::<(), async_nats::SubscribeError>(())
            })
            .await?;
        let token = self.mux.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut routes) = self.mux.routes.lock() {
            routes.insert(token, tx);
        }
        Ok(Replies {
            subject: format!("{}.{token}", self.mux.prefix),
            token,
            routes: self.mux.routes.clone(),
            rx,
        })
    }
}

impl Deref for Bus {
    type Target = async_nats::Client;

    fn deref(&self) -> &async_nats::Client {
        &self.client
    }
}

/// The replies to one request.
pub struct Replies {
    /// The subject to name as the request's reply-to.
    pub subject: String,
    token: u64,
    routes: Routes,
    rx: mpsc::UnboundedReceiver<async_nats::Message>,
}

impl Replies {
    /// The next reply; `None` when the connection's reply subscription ended.
    pub async fn next(&mut self) -> Option<async_nats::Message> {
        self.rx.recv().await
    }
}

impl Drop for Replies {
    fn drop(&mut self) {
        if let Ok(mut routes) = self.routes.lock() {
            routes.remove(&self.token);
        }
    }
}

async fn route(mut sub: async_nats::Subscriber, routes: Routes) {
    while let Some(msg) = sub.next().await {
        let Some(token) = msg.subject.rsplit('.').next().and_then(|t| t.parse::<u64>().ok()) else {
            continue;
        };
        let tx = routes.lock().ok().and_then(|r| r.get(&token).cloned());
        // A reply for a request that already finished (a late hedge answer) is dropped.
        if let Some(tx) = tx {
            let _ = tx.send(msg);
        }
    }
    // The connection is gone: every waiting request sees its replies end.
    if let Ok(mut routes) = routes.lock() {
        routes.clear();
    }
}
