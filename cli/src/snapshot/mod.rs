//! The NIP-AR snapshot reference client: the capture from start to completion (`client.rs`, which
//! names the client's whole surface), its pages and bodies (`fetch.rs`), the relay side
//! (`http.rs`), the live subscription (`live.rs`), local writes (`local.rs`), verification and
//! reconciliation (`merge.rs`), progress (`step.rs`), why a snapshot failed (`error.rs`), and the
//! `buzz snapshot` command over it (`command.rs`).

pub mod client;
pub mod command;
pub mod error;
pub mod fetch;
pub mod http;
pub mod live;
pub mod local;
pub mod merge;
pub mod step;
