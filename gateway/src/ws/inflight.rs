//! The queries of one socket in progress (waiting for a slot or streaming), so that each can be
//! stopped when what asked for it is gone: its subscription closed or replaced, the socket's
//! authentication dropped, the socket closed. Stopping a query aborts its task, whose drop tells
//! the query-services to cancel it (`query::run`).

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

use super::query::Ticket;

/// One socket's queries in progress.
pub struct Reads {
    /// Query slots of this socket (`max_inflight_queries`): a query runs once it holds one.
    pub slots: Arc<Semaphore>,
    running: HashMap<Ticket, (String, AbortHandle)>,
    next_serial: u64,
}

impl Reads {
    /// No query in progress, `per_socket` slots.
    #[must_use]
    pub fn new(per_socket: usize) -> Self {
        Self { slots: Arc::new(Semaphore::new(per_socket)), running: HashMap::new(), next_serial: 0 }
    }

    /// A serial for a new COUNT's ticket.
    pub fn next_serial(&mut self) -> u64 {
        self.next_serial += 1;
        self.next_serial
    }

    /// COUNTs in progress.
    #[must_use]
    pub fn counts(&self) -> usize {
        self.running.keys().filter(|t| matches!(t, Ticket::Count { .. })).count()
    }

    /// Records the task of `ticket`, asked by subscription id `sub_id`.
    pub fn started(&mut self, ticket: Ticket, sub_id: String, task: AbortHandle) {
        self.running.insert(ticket, (sub_id, task));
    }

    /// The query of `ticket` ended; `false` when it had been stopped already (its answer is stale).
    pub fn finished(&mut self, ticket: Ticket) -> bool {
        self.running.remove(&ticket).is_some()
    }

    /// Stops every query asked under `sub_id` (REQ and COUNT alike).
    pub fn cancel_sub(&mut self, sub_id: &str) {
        self.running.retain(|_, (id, task)| {
            let keep = id != sub_id;
            if !keep {
                task.abort();
            }
            keep
        });
    }

    /// Stops every query of the socket.
    pub fn cancel_all(&mut self) {
        for (_, (_, task)) in self.running.drain() {
            task.abort();
        }
    }
}

impl Drop for Reads {
    fn drop(&mut self) {
        self.cancel_all();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pending() -> tokio::task::JoinHandle<()> {
        tokio::spawn(std::future::pending())
    }

    #[tokio::test]
    async fn closing_a_subscription_stops_its_queries_and_no_other() {
        let mut reads = Reads::new(8);
        let (a, b, c) = (pending(), pending(), pending());
        reads.started(Ticket::Page { generation: 1 }, "a".into(), a.abort_handle());
        reads.started(Ticket::Count { serial: 1 }, "a".into(), b.abort_handle());
        reads.started(Ticket::Page { generation: 2 }, "b".into(), c.abort_handle());
        assert_eq!(reads.counts(), 1);
        reads.cancel_sub("a");
        assert!(a.await.unwrap_err().is_cancelled());
        assert!(b.await.unwrap_err().is_cancelled());
        assert!(!c.is_finished());
        assert!(!reads.finished(Ticket::Page { generation: 1 }), "a stopped query's answer is stale");
        assert!(reads.finished(Ticket::Page { generation: 2 }));
        c.abort();
    }

    #[tokio::test]
    async fn dropping_the_socket_stops_every_query() {
        let mut reads = Reads::new(8);
        let tasks: Vec<_> = (0..3).map(|_| pending()).collect();
        for (i, t) in tasks.iter().enumerate() {
            let serial = reads.next_serial();
            reads.started(Ticket::Count { serial }, i.to_string(), t.abort_handle());
        }
        assert_eq!(reads.running.len(), 3);
        drop(reads);
        for t in tasks {
            assert!(t.await.unwrap_err().is_cancelled());
        }
    }
}
