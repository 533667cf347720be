//! What every write path shares: the accepted-write result, the relay's key, and storing an event for fan-out. It imports
//! nothing from the write paths, so they all depend on it and never on each other's internals.

use buzz_bus::{Audience, LiveEvent, WriteOk};
use buzz_core::{ChannelId, CommunityId, Event, EventId};
use buzz_store::access;
use sqlx::PgConnection;

use crate::error::WriteResult;
use crate::store;

/// The result of an accepted write: the reply, and what to publish once committed.
pub struct Accepted {
    /// The reply to the writer.
    pub ok: WriteOk,
    /// The accepted event, for live fan-out.
    pub live: Option<LiveEvent>,
    /// Relay-signed events stored with it (39000/39002), also fanned out.
    pub also: Vec<LiveEvent>,
    /// The community's access changed (the channel concerned): gateways drop cached answers.
    pub access_changed: Option<ChannelId>,
    /// The stored event's acceptance order.
    pub seq: Option<i64>,
    /// `live.banned` is already filled in (the post path reads it with the channel).
    pub bans_resolved: bool,
}

impl Accepted {
    /// The answer to an event that is already stored: nothing to publish.
    #[must_use]
    pub fn duplicate() -> Self {
        Self {
            ok: duplicate(),
            live: None,
            also: Vec::new(),
            access_changed: None,
            seq: None,
            bans_resolved: true,
        }
    }
}

/// The relay's own key and signing, for the events the relay writes itself.
pub struct Relay<'a> {
    /// The relay's key pair.
    pub keys: &'a buzz_core::Keys,
}

/// A community role as the bus carries it, as it is stored.
pub(crate) fn stored_role(role: buzz_bus::Role) -> buzz_store::Role {
    match role {
        buzz_bus::Role::Member => buzz_store::Role::Member,
        buzz_bus::Role::Admin => buzz_store::Role::Admin,
        buzz_bus::Role::Owner => buzz_store::Role::Owner,
    }
}

/// `OK true "duplicate: ..."` for an event already stored.
pub fn duplicate() -> WriteOk {
    WriteOk { duplicate: true, message: "duplicate: already have this event".into(), data: None }
}

pub(crate) async fn store_and_announce(
    tx: &mut PgConnection,
    community: CommunityId,
    event: Event,
    channel: &access::Channel,
    thread_root: Option<&EventId>,
) -> WriteResult<Accepted> {
    let Some(seq) =
        store::insert_event(tx, community, &event, Some(channel.id), channel.ttl_seconds, thread_root)
            .await?
    else {
        return Ok(Accepted::duplicate());
    };
    Ok(Accepted {
        ok: WriteOk::applied(),
        live: Some(live_event(community, channel, event)),
        also: Vec::new(),
        access_changed: None,
        seq: Some(seq),
        bans_resolved: false,
    })
}

/// A stored event of `channel` as it is fanned out (audience decided from the stored channel).
#[must_use]
pub fn live_event(community: CommunityId, channel: &access::Channel, event: Event) -> LiveEvent {
    let audience = if channel.is_open() { Audience::Community } else { Audience::ChannelMembers };
    LiveEvent {
        community_id: community,
        channel_id: Some(channel.id),
        audience,
        event,
        access_version: 0,
        banned: Vec::new(),
        replaced_tags: Vec::new(),
    }
}
