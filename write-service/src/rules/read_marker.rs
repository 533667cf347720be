//! `POST /api/channels/{id}/read`: a read marker moves to a message the caller can read. A
//! read-model write needs `messages:read`, not `messages:write`: it changes only the caller's
//! own state.

use buzz_bus::{Actor, Scope};
use buzz_store::access::{self, Channel, Standing};

use super::admission::credential;
use super::Refusal;

/// The credential may read messages; checked before anything is read.
pub fn scope(actor: &Actor) -> Result<(), Refusal> {
    if actor.has_scope(Scope::MessagesRead) {
        Ok(())
    } else {
        Err(Refusal::ReadScope)
    }
}

/// The caller can read the channel (`None`: none), under its credential: a channel it cannot
/// read is answered as one that does not exist.
pub fn readable(channel: Option<&Channel>, standing: Standing, actor: &Actor) -> Result<(), Refusal> {
    if channel.is_some_and(|c| access::can_read(c, standing, credential(actor))) {
        Ok(())
    } else {
        Err(Refusal::ChannelNotReadable)
    }
}

/// `up_to` is a served kind-9 message of the channel: its acceptance order (`None`: it is not).
pub fn up_to(seq: Option<i64>) -> Result<i64, Refusal> {
    seq.ok_or(Refusal::UpToNotMessage)
}

#[cfg(test)]
mod tests {
    use buzz_core::{ChannelId, Keys};

    use super::*;

    #[test]
    fn a_marker_needs_the_read_scope_a_readable_channel_and_a_message_of_it() {
        let actor = Actor::session(Keys::generate().pubkey());
        let write_only = Actor { scopes: vec![Scope::MessagesWrite], ..actor.clone() };
        assert_eq!(scope(&write_only), Err(Refusal::ReadScope));
        let member = Standing { community_member: true, ..Standing::default() };
        let open = crate::rules::open_channel(ChannelId::from_u128(1));
        assert_eq!(readable(None, member, &actor), Err(Refusal::ChannelNotReadable));
        let elsewhere = Actor { channel_ids: Some(vec![ChannelId::from_u128(2)]), ..actor.clone() };
        assert_eq!(readable(Some(&open), member, &elsewhere), Err(Refusal::ChannelNotReadable));
        assert_eq!(readable(Some(&open), member, &actor), Ok(()));
        assert_eq!(up_to(None), Err(Refusal::UpToNotMessage));
        assert_eq!(up_to(Some(7)), Ok(7));
    }
}
