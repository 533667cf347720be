//! The relay's own channel state (39000 metadata, 39002 members): what its tags say, from the
//! channel tables. The write-service signs it on every change of a channel or its members; a
//! community import (policy-service) derives it again from the imported tables, so both hold one
//! definition.

use buzz_core::{ChannelId, CommunityId, Pubkey};
use sqlx::PgConnection;

use crate::access::Channel;
use crate::domain::{Role, Visibility};

/// The tags of a channel's 39000 metadata.
#[must_use]
pub fn metadata_tags(channel: &Channel) -> Vec<Vec<String>> {
    let mut tags = vec![
        vec!["d".to_owned(), channel.id.to_string()],
        vec!["name".to_owned(), channel.name.clone()],
        vec![if channel.visibility == Visibility::Open { "public" } else { "private" }.to_owned()],
        vec!["visibility".to_owned(), channel.visibility.as_str().to_owned()],
        vec!["channel_type".to_owned(), channel.channel_type.as_str().to_owned()],
        vec!["archived".to_owned(), channel.archived.to_string()],
    ];
    if let Some(ttl) = channel.ttl_seconds {
        tags.push(vec!["ttl".to_owned(), ttl.to_string()]);
    }
    tags
}

/// The tags of a channel's 39002 member list: its [`channel_members`] with their roles.
#[must_use]
pub fn members_tags(channel: ChannelId, members: Vec<(Pubkey, Role)>) -> Vec<Vec<String>> {
    let mut tags = Vec::with_capacity(members.len() + 1);
    tags.push(vec!["d".to_owned(), channel.to_string()]);
    for (pubkey, role) in members {
        tags.push(vec!["p".to_owned(), pubkey.into(), role.as_str().to_owned()]);
    }
    tags
}

/// Active members of a channel with their roles, in a stable order; at most `at_most` of them
/// when given.
pub async fn channel_members(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    at_most: Option<i64>,
) -> Result<Vec<(Pubkey, Role)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT pubkey, role FROM channel_members WHERE community_id = $1 AND channel_id = $2 AND removed_at IS NULL \
         ORDER BY added_at, pubkey LIMIT $3",
    )
    .bind(community)
    .bind(channel)
    .bind(at_most)
    .fetch_all(conn)
    .await
}

/// A channel as its state describes it, deleted or not (a deleted channel keeps its last 39000).
pub async fn channel(
    conn: &mut PgConnection,
    community: CommunityId,
    id: ChannelId,
) -> Result<Option<Channel>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, name, visibility, channel_type, ttl_seconds, archived FROM channels \
         WHERE community_id = $1 AND id = $2",
    )
    .bind(community)
    .bind(id)
    .fetch_optional(conn)
    .await
}
