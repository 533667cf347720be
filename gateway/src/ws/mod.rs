//! One task per socket: `select!` over the socket, internal results, live pushes, a ping timer and
//! shutdown. Protocol decisions are small functions in `subs`; this file owns the loop.

pub(crate) mod query;
mod session;
pub mod subs;

pub use session::run;
