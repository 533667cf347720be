//! NIP-FI at the gateway: admission of sockets and HTTP requests by FI evidence (`admission.rs`),
//! the contract's denials (`denial.rs`), and revalidation of open sockets when a community's
//! policy changes (`sockets.rs`). `GET /info` is a tenant HTTP route (`http/info.rs`).

pub mod admission;
pub mod denial;
pub mod sockets;
