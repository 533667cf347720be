//! Host leases for gateways: the bus handler (`handler.rs`), the read under the host lease lock
//! (`store.rs`) and the NIP-86 rules a lease carries (`rules.rs`).

pub mod handler;
pub mod rules;
pub mod store;
