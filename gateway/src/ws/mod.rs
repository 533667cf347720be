//! One task per socket: `select!` over the socket, internal results, live pushes, a ping timer and
//! shutdown, with a separate writer task draining a byte-bounded outbound queue. Protocol
//! decisions are small functions in `subs`; `session` owns the loop.

mod auth;
mod meter;
mod outbound;
pub(crate) mod query;
mod reads;
mod session;
pub mod subs;
mod writes;

pub use session::run;
