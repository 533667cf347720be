//! Every write rule, decided once: a pure function from what the database says (a small view) and
//! the request to a decision or its typed [`Refusal`]. The families' paths, one at a time and by
//! group commit, only gather the view and apply the decision; no write path decides a refusal
//! itself. Nothing here reads the database or imports a write path.
//!
//! - [`admission`]: what every client event passes first, and the kind-9 write rule in a channel.
//! - [`post`]: kind 9 (`h`, thread root).
//! - [`channel`]: kind 9007, channel creation.
//! - [`deletion`]: kind 5 (NIP-09), NIP-AR revisions refused with a reason.
//! - [`moderation`]: channel administration (9000, 9001, 9002, 9005, 9008).
//! - [`revision`]: NIP-AR envelope, identity, compare-and-swap, resubmission, moves, delete and
//!   restore, the root rule (in the order `revision/mod.rs` documents).
//! - [`members`]: who manages community members, grants which role and removes whom.
//! - [`manage`]: NIP-86, over the members rules and the channel's message-removal rule.
//! - [`tokens`]: token grants.
//! - [`read_marker`]: read markers.
//! - [`refusal`]: the one table of refusal texts.

pub mod admission;
pub mod channel;
pub mod deletion;
pub mod manage;
pub mod members;
pub mod moderation;
pub mod post;
pub mod read_marker;
pub mod refusal;
pub mod revision;
pub mod tokens;

pub use refusal::Refusal;

/// An open, live, unarchived stream channel `id`, for the rules' tests.
#[cfg(test)]
pub(crate) fn open_channel(id: buzz_core::ChannelId) -> buzz_store::access::Channel {
    buzz_store::access::Channel {
        id,
        name: "c".into(),
        visibility: buzz_store::Visibility::Open,
        channel_type: buzz_store::ChannelType::Stream,
        ttl_seconds: None,
        archived: false,
    }
}
