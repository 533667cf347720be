//! The relay-signed channel state: kind 39000 (metadata) and 39002 (members), regenerated
//! whenever a channel is created or its metadata or members change.

use buzz_bus::LiveEvent;
use buzz_core::kinds::{CHANNEL_MEMBERS, CHANNEL_METADATA};
use buzz_core::CommunityId;
use buzz_store::access::Channel;
use buzz_store::relay_state::{channel_members, members_tags, metadata_tags};
use sqlx::PgConnection;

use crate::channel::sql::drop_relay_event;
use crate::engine::{live_event, Relay};
use crate::error::WriteResult;
use crate::store;

/// Regenerates the relay-signed channel events of `kinds` (39000 metadata, 39002 members),
/// keeping only the newest of each.
pub async fn relay_state(
    tx: &mut PgConnection,
    community: CommunityId,
    channel: &Channel,
    relay: &Relay<'_>,
    kinds: &[u32],
) -> WriteResult<Vec<LiveEvent>> {
    let mut out = Vec::new();
    for kind in [CHANNEL_METADATA, CHANNEL_MEMBERS] {
        if !kinds.contains(&kind) {
            continue;
        }
        let tags = if kind == CHANNEL_METADATA {
            metadata_tags(channel)
        } else {
            members_tags(channel.id, channel_members(tx, community, channel.id, None).await?)
        };
        let signed = relay.keys.sign_new(kind, tags, "");
        drop_relay_event(tx, community, channel.id, kind, &signed.pubkey).await?;
        if store::insert_event(tx, community, &signed, Some(channel.id), None, None).await?.is_none() {
            continue;
        }
        out.push(live_event(community, channel, signed));
    }
    Ok(out)
}
