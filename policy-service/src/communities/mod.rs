//! The communities of the operator API: create, read and update (`routes.rs`, SQL in
//! `store.rs`), host and owner changes and deletion (`lifecycle.rs`, SQL in
//! `lifecycle_store.rs`), and the NIP-86 audit log (`audit.rs`).

pub mod audit;
pub mod lifecycle;
pub mod lifecycle_store;
pub mod routes;
pub mod store;
