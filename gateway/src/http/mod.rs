//! Tenant HTTP: the router with NIP-11, the WebSocket upgrade and the members API (`router.rs`),
//! and one module per route family: NIP-86 management (`manage.rs`), bearer tokens (`tokens.rs`),
//! the chat read model (`chat.rs`), `POST /query` (`query.rs`) with its NIP-AR snapshot actions
//! (`snapshot.rs`), and `GET /info` (`info.rs`). Every request goes through host binding and
//! authentication (`request.rs`), which handlers receive as extractors (`extract.rs`).

pub mod chat;
pub mod extract;
pub mod info;
pub mod manage;
pub mod query;
pub mod request;
pub mod router;
pub mod snapshot;
pub mod tokens;
