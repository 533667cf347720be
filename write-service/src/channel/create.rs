//! Kind 9007, channel creation (`rules::channel` decides): creates the channel, its members and
//! the relay's channel state.

use buzz_bus::BusError;
use buzz_core::kinds;
use buzz_store::{access, ChannelType, Role};
use sqlx::PgConnection;

use crate::channel::sql;
use crate::channel::state::relay_state;
use crate::engine::single::{store_and_announce, One};
use crate::engine::Accepted;
use crate::error::WriteResult;
use crate::rules::channel;

/// Creates the channel: the creator becomes its owner (a DM's participants are all members), and
/// the relay's 39000/39002 for it are stored beside the 9007.
pub(crate) async fn create_channel(tx: &mut PgConnection, w: One<'_>) -> WriteResult<Accepted> {
    let One { community, actor, event, relay } = w;
    let spec = channel::admit(&event, actor)?;
    let dm = spec.channel_type == ChannelType::Dm;
    let mut members = Vec::with_capacity(spec.peers.len());
    for key in &spec.peers {
        members.push(access::community_role(tx, community, key).await?.is_some());
    }
    let participants = channel::participants(actor.member_key(), &spec, &members)?;
    channel::created(sql::create_channel(tx, community, &spec, &actor.pubkey).await?)?;
    let role = if dm { Role::Member } else { Role::Owner };
    sql::add_channel_members(tx, community, spec.id, &participants, role).await?;
    let channel =
        access::load_channel(tx, community, spec.id, false).await?.ok_or_else(BusError::internal)?;
    let mut accepted = store_and_announce(tx, community, event, &channel, None).await?;
    let state = [kinds::CHANNEL_METADATA, kinds::CHANNEL_MEMBERS];
    accepted.also = relay_state(tx, community, &channel, relay, &state).await?;
    Ok(accepted)
}
