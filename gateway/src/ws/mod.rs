//! One task per socket (`session.rs`, its `run`): it owns the socket's `Session` and its `select!` over
//! the socket, query results, live pushes, the idle/auth deadlines and shutdown. A separate
//! writer task (`outbound`) drains a byte-bounded queue into the socket, so the loop never waits
//! on the network. The loop dispatches each client message to its handler module: `auth` (NIP-42
//! `AUTH`), `writes` (`EVENT`, one task per write), `reads` (`REQ`/`COUNT`, one `query` task per
//! request streaming the query-service's frames back, bounded per socket and per key (`slots.rs`), and
//! cancelled when its socket, subscription or client is gone); `CLOSE` is handled in the loop itself. `subs` holds the subscription
//! table and the pure rules of live delivery.

mod auth;
mod inflight;
mod meter;
mod outbound;
pub(crate) mod query;
mod reads;
pub(crate) mod session;
pub mod subs;
mod writes;
