//! Test harness for buzz-relay: a whole cluster (policy, N write, N query, snapshot and N gateway
//! replicas) in-process against the real PostgreSQL, Redis and NATS, isolated per test by a fresh
//! database, a NATS subject prefix and a Redis key prefix; plus a small NIP-01 WebSocket client.

#![allow(clippy::unwrap_used)]

pub mod client;
pub mod cluster;
pub mod helpers;
pub mod nip86;
pub mod nip_fi;
pub mod noisy;
pub mod processes;
pub mod props;
pub mod replicas;
pub mod secrets;
pub mod seed;
pub mod snapshot;

pub use client::WsClient;
pub use cluster::{Cluster, ClusterOptions, Community};
