//! The bus of buzz-relay: NATS subjects, versioned payloads, the error code enum and trace context
//! carried in NATS headers.

pub mod chat;
pub mod error;
pub mod latency;
pub mod manage;
pub mod mux;
pub mod nats;
pub mod payload;
pub mod retry;
pub mod rpc;
pub mod serve;
pub mod snapshot;
pub mod subjects;
pub mod trace;

pub use chat::*;
pub use error::{BusError, ErrorCode};
pub use mux::Bus;
pub use nats::{NatsArgs, NatsConfig};
pub use payload::*;
pub use subjects::Subjects;

#[cfg(test)]
mod wire_tests;
