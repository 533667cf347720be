//! The library half of `buzz`: the NIP-AR snapshot reference client and its command (`snapshot`),
//! used by `buzz snapshot` and by the end-to-end tests, and community export and import
//! (`transfer`).

pub mod snapshot;
pub mod transfer;
