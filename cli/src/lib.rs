//! The library half of `buzz`: the NIP-AR snapshot reference client (`snapshot_client`), used by
//! `buzz snapshot` and by the end-to-end tests, and community export and import (`transfer`).

pub mod snapshot_client;
pub mod snapshot_error;
pub mod snapshot_fetch;
pub mod snapshot_http;
pub mod snapshot_live;
pub mod snapshot_local;
pub mod snapshot_merge;
pub mod snapshot_step;
pub mod transfer;
