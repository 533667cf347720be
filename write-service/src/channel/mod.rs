//! Channels and their membership: kind 9007 creates a channel (`create.rs`); kinds 9000 (put
//! user), 9001 (remove user), 9002 (edit), 9005 (redact) and 9008 (delete channel) administer it
//! (`moderate.rs`); both regenerate the relay-signed 39000/39002 (`state.rs`). The rules are
//! `rules::channel`'s and `rules::moderation`'s; the statements, `sql.rs`.

pub mod create;
pub mod moderate;
pub mod sql;
pub mod state;

use buzz_core::kinds::CREATE_CHANNEL;
use buzz_store::Role;
use sqlx::PgConnection;

use crate::engine::single::{Family, One, Written};

/// Kinds 9007 and 9000–9008 (any other kind sent here is refused by the rules), registered for
/// the one-event transaction.
pub struct Channels;

impl Family for Channels {
    fn write<'a>(&'a self, tx: &'a mut PgConnection, w: One<'a>, _role: Role) -> Written<'a> {
        if w.event.kind == CREATE_CHANNEL {
            Box::pin(create::create_channel(tx, w))
        } else {
            Box::pin(moderate::moderate(tx, w))
        }
    }
}
