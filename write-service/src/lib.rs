//! Write-service of buzz-relay: every state change. A write is acknowledged only after its
//! transaction commits; what was accepted is then published for live fan-out.
//!
//! The service is organised by what it writes: one folder per family (its load → decide →
//! store steps and their statements), over one commit engine (`engine`: group commit, and the
//! one-event transaction) and one set of pure rules (`rules`). Event families are registered by
//! kind in `writer.rs` (`family`), where the bus handler also dispatches the requests that are
//! not events (`members`, `tokens`, `read_marks`, `manage`). `write-service/README.md` maps the
//! folders and says how to add a kind.

pub mod app;
pub mod channel;
pub mod deletion;
pub mod engine;
pub mod error;
pub mod manage;
pub mod members;
pub mod post;
pub mod read_marks;
pub mod revision;
pub mod rules;
pub mod settings;
mod store;
pub mod tokens;
pub mod writer;

pub use app::Application;
pub use engine::{Accepted, Alone, BatchSettings, Batcher, Pools, Relay};
pub use settings::Settings;
pub use writer::{family, write_event, write_posts, write_revisions, Writer};
