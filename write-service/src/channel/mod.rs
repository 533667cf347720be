//! Channels and their membership: kind 9007 creates a channel (`create.rs`); kinds 9000 (put
//! user), 9001 (remove user), 9002 (edit), 9005 (redact) and 9008 (delete channel) administer it
//! (`moderate.rs`); both regenerate the relay-signed 39000/39002 (`state.rs`). The rules are
//! `rules::channel`'s and `rules::moderation`'s; the statements, `sql.rs`.

pub mod create;
pub mod moderate;
pub mod sql;
pub mod state;
