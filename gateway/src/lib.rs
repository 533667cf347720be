//! Gateway of buzz-relay: WebSockets and tenant HTTP. Binds each request to a community by Host,
//! speaks NIP-01/11/42/98, checks ids and signatures off the async runtime, forwards writes and
//! reads over NATS and fans live events out to the matching subscriptions of its sockets.
//!
//! `app` builds and runs the gateway over the shared `state`; `http` holds the tenant HTTP
//! routes, `ws` the WebSocket sessions, `fi` NIP-FI admission and revalidation; `hosts`,
//! `access`, `live` and `ratelimit` are the bus, fan-out and Redis clients they share.

pub mod access;
pub mod app;
pub mod fi;
pub mod hosts;
pub mod http;
pub mod listener;
pub mod live;
pub mod ratelimit;
pub mod settings;
pub mod slots;
pub mod state;
pub mod ws;

pub use app::Application;
pub use settings::Settings;
