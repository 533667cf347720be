//! The one access module: who may read and who may write a channel. Every read and write path
//! (REQ, COUNT, live delivery, HTTP, artifacts) decides through here, either by the pure functions
//! below or by the SQL fragment that encodes the same read rule
//! (`fragments::readable_channel`).

use buzz_core::{ChannelId, CommunityId, ErrorCode, Pubkey};
use sqlx::PgConnection;

use crate::domain::{ChannelType, Role, Visibility};

/// A stored channel, as access needs it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Channel {
    /// The channel's id (its `h`).
    pub id: ChannelId,
    /// Display name, 1 to 256 bytes (DMs may have none).
    pub name: String,
    /// Open or private.
    pub visibility: Visibility,
    /// Stream, forum or DM.
    pub channel_type: ChannelType,
    /// Events expire this many seconds after acceptance (`None`: kept).
    pub ttl_seconds: Option<i32>,
    /// Readable but no longer writable.
    pub archived: bool,
}

impl Channel {
    /// Open channels are readable by every community member (DMs never are).
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.visibility == Visibility::Open && self.channel_type != ChannelType::Dm
    }
}

/// The reader's standing, loaded once per decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Standing {
    /// Member of the community (any role), or an agent admitted through a member.
    pub community_member: bool,
    /// Community owner or admin.
    pub community_admin: bool,
    /// Active (not removed) member of the channel.
    pub channel_member: bool,
    /// Owner or admin of the channel.
    pub channel_admin: bool,
    /// Removed from the channel by a moderator: no read or write there, open or not.
    pub banned: bool,
}

/// Credential limits: token scopes and channel restriction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credential<'a> {
    /// Scope `messages:read`.
    pub can_read_messages: bool,
    /// Scope `messages:write`.
    pub can_write_messages: bool,
    /// `None`: unrestricted.
    pub channel_ids: Option<&'a [ChannelId]>,
}

impl Credential<'_> {
    fn allows_channel(&self, id: ChannelId) -> bool {
        self.channel_ids.is_none_or(|ids| ids.contains(&id))
    }
}

/// Read rule (contract "Channels"): an open channel and a community member, or an active channel
/// member (DMs: participants only), within the credential's scope and channel restriction.
#[must_use]
pub fn can_read(channel: &Channel, standing: Standing, cred: Credential<'_>) -> bool {
    cred.can_read_messages
        && cred.allows_channel(channel.id)
        && standing.community_member
        && !standing.banned
        && (standing.channel_member || channel.is_open())
}

/// Why a write is refused, with its [`ErrorCode`] ([`WriteDenial::code`], so its NIP-01 prefix);
/// its text, which names nothing the caller cannot read, is the write-service's refusal table
/// (`buzz_write::rules::Refusal::Denied`), the one place write refusals are spelled out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteDenial {
    /// The channel does not exist or the caller cannot read it: indistinguishable on purpose
    /// (`restricted:`).
    NotFound,
    /// The credential lacks `messages:write` or is restricted to other channels (`restricted:`).
    Scope,
    /// The channel is archived: readable, not writable (`blocked:`).
    Archived,
    /// A private channel (or DM) the caller has not joined (`restricted:`).
    NotMember,
}

impl WriteDenial {
    /// The code it is answered with.
    #[must_use]
    pub fn code(self) -> ErrorCode {
        match self {
            Self::NotFound | Self::Scope | Self::NotMember => ErrorCode::Restricted,
            Self::Archived => ErrorCode::Blocked,
        }
    }
}

/// Write rule = everything that admits a kind-9 post: readable, scope `messages:write` and channel
/// restriction, not archived, and channel membership, except that community members may post in
/// open channels they have not joined.
pub fn can_write(
    channel: Option<&Channel>,
    standing: Standing,
    cred: Credential<'_>,
) -> Result<(), WriteDenial> {
    // Existence is judged by the pubkey's standing; the credential only narrows what it may do.
    let unrestricted = Credential { can_read_messages: true, can_write_messages: true, channel_ids: None };
    let Some(channel) = channel.filter(|c| can_read(c, standing, unrestricted)) else {
        return Err(WriteDenial::NotFound);
    };
    if !cred.can_write_messages || !cred.allows_channel(channel.id) {
        return Err(WriteDenial::Scope);
    }
    if channel.archived {
        return Err(WriteDenial::Archived);
    }
    if !(standing.channel_member || channel.is_open()) {
        return Err(WriteDenial::NotMember);
    }
    Ok(())
}

/// Loads a live (not deleted) channel; `lock` takes a share lock so the channel cannot change
/// under a write that depends on it.
pub async fn load_channel(
    conn: &mut PgConnection,
    community: CommunityId,
    id: ChannelId,
    lock: bool,
) -> Result<Option<Channel>, sqlx::Error> {
    let sql = if lock {
        "SELECT id, name, visibility, channel_type, ttl_seconds, archived FROM channels \
         WHERE community_id = $1 AND id = $2 AND deleted_at IS NULL FOR SHARE"
    } else {
        "SELECT id, name, visibility, channel_type, ttl_seconds, archived FROM channels \
         WHERE community_id = $1 AND id = $2 AND deleted_at IS NULL"
    };
    sqlx::query_as(sql).bind(community).bind(id).fetch_optional(conn).await
}

/// The community role of `pubkey`, if a member.
pub async fn community_role(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
) -> Result<Option<Role>, sqlx::Error> {
    sqlx::query_scalar("SELECT role FROM community_members WHERE community_id = $1 AND pubkey = $2")
        .bind(community)
        .bind(pubkey)
        .fetch_optional(conn)
        .await
}

/// The standing of `pubkey` towards `channel`.
pub async fn standing(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    pubkey: &Pubkey,
) -> Result<Standing, sqlx::Error> {
    let row: Option<(Role, Option<Role>, Option<bool>)> = sqlx::query_as(
        "SELECT cm.role, CASE WHEN chm.removed_at IS NULL THEN chm.role END, chm.banned \
         FROM community_members cm \
         LEFT JOIN channel_members chm ON chm.community_id = cm.community_id AND chm.channel_id = $2 \
              AND chm.pubkey = cm.pubkey \
         WHERE cm.community_id = $1 AND cm.pubkey = $3",
    )
    .bind(community)
    .bind(channel)
    .bind(pubkey)
    .fetch_optional(conn)
    .await?;
    Ok(match row {
        None => Standing::default(),
        Some((community_role, channel_role, banned)) => Standing {
            community_member: true,
            community_admin: community_role.is_admin(),
            channel_member: channel_role.is_some(),
            channel_admin: channel_role.is_some_and(Role::is_admin),
            banned: banned.unwrap_or(false),
        },
    })
}

/// Bumps the community's access version (inside the transaction that changes access) and
/// returns the new value.
pub async fn bump_access_version(
    conn: &mut PgConnection,
    community: CommunityId,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "UPDATE communities SET access_version = access_version + 1 WHERE id = $1 RETURNING access_version",
    )
    .bind(community)
    .fetch_one(conn)
    .await
}

/// A post's view of its channel in one round trip: the live channel (share-locked, so it cannot
/// change under the post), the poster's standing given their community role, and the keys banned
/// from it (excluded from open-channel live delivery).
pub async fn channel_for_post(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    pubkey: &Pubkey,
    community_role: Option<Role>,
) -> Result<(Option<Channel>, Standing, Vec<Pubkey>), sqlx::Error> {
    type Row =
        (ChannelId, String, Visibility, ChannelType, Option<i32>, bool, Option<Role>, bool, Vec<Pubkey>);
    let row: Option<Row> = sqlx::query_as(
        "SELECT ch.id, ch.name, ch.visibility, ch.channel_type, ch.ttl_seconds, ch.archived, \
                CASE WHEN chm.removed_at IS NULL THEN chm.role END, coalesce(chm.banned, false), \
                ARRAY(SELECT b.pubkey FROM channel_members b \
                      WHERE b.community_id = $1 AND b.channel_id = $2 AND b.banned) \
         FROM channels ch \
         LEFT JOIN channel_members chm ON chm.community_id = ch.community_id AND chm.channel_id = ch.id \
              AND chm.pubkey = $3 \
         WHERE ch.community_id = $1 AND ch.id = $2 AND ch.deleted_at IS NULL \
         FOR SHARE OF ch",
    )
    .bind(community)
    .bind(channel)
    .bind(pubkey)
    .fetch_optional(conn)
    .await?;
    let mut standing = Standing {
        community_member: community_role.is_some(),
        community_admin: community_role.is_some_and(Role::is_admin),
        ..Standing::default()
    };
    let Some((id, name, visibility, channel_type, ttl_seconds, archived, role, banned, banned_list)) = row
    else {
        return Ok((None, standing, Vec::new()));
    };
    standing.channel_member = role.is_some();
    standing.channel_admin = role.is_some_and(Role::is_admin);
    standing.banned = banned;
    Ok((Some(Channel { id, name, visibility, channel_type, ttl_seconds, archived }), standing, banned_list))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(visibility: &str, channel_type: &str, archived: bool) -> Channel {
        Channel {
            id: ChannelId::from_u128(7),
            name: "c".into(),
            visibility: Visibility::parse(visibility).unwrap(),
            channel_type: ChannelType::parse(channel_type).unwrap(),
            ttl_seconds: None,
            archived,
        }
    }
    const FULL: Credential<'static> =
        Credential { can_read_messages: true, can_write_messages: true, channel_ids: None };
    const MEMBER: Standing = Standing {
        community_member: true,
        community_admin: false,
        channel_member: false,
        channel_admin: false,
        banned: false,
    };
    const JOINED: Standing = Standing { channel_member: true, ..MEMBER };

    #[test]
    fn a_community_member_reads_and_posts_in_open_channels_without_joining() {
        let c = channel("open", "stream", false);
        assert!(can_read(&c, MEMBER, FULL));
        assert_eq!(can_write(Some(&c), MEMBER, FULL), Ok(()));
    }

    #[test]
    fn private_channels_and_dms_are_for_their_members_only() {
        for c in [channel("private", "stream", false), channel("open", "dm", false)] {
            assert!(!can_read(&c, MEMBER, FULL));
            assert_eq!(can_write(Some(&c), MEMBER, FULL), Err(WriteDenial::NotFound));
            assert!(can_read(&c, JOINED, FULL));
            assert_eq!(can_write(Some(&c), JOINED, FULL), Ok(()));
        }
    }

    #[test]
    fn a_non_member_of_the_community_can_do_nothing() {
        let c = channel("open", "stream", false);
        let outsider = Standing { channel_member: true, ..Standing::default() };
        assert!(!can_read(&c, outsider, FULL));
        assert_eq!(can_write(Some(&c), outsider, FULL), Err(WriteDenial::NotFound));
    }

    #[test]
    fn a_banned_member_neither_reads_nor_writes_even_an_open_channel() {
        let c = channel("open", "stream", false);
        let banned = Standing { banned: true, ..MEMBER };
        assert!(!can_read(&c, banned, FULL));
        assert_eq!(can_write(Some(&c), banned, FULL), Err(WriteDenial::NotFound));
    }

    #[test]
    fn archived_channels_are_readable_but_not_writable() {
        let c = channel("open", "stream", true);
        assert!(can_read(&c, JOINED, FULL));
        assert_eq!(can_write(Some(&c), JOINED, FULL), Err(WriteDenial::Archived));
    }

    #[test]
    fn token_scope_and_channel_restriction_limit_reads_and_writes() {
        let c = channel("open", "stream", false);
        let read_only = Credential { can_write_messages: false, ..FULL };
        assert!(can_read(&c, JOINED, read_only));
        assert_eq!(can_write(Some(&c), JOINED, read_only), Err(WriteDenial::Scope));
        let other = [ChannelId::from_u128(8)];
        let elsewhere = Credential { channel_ids: Some(&other), ..FULL };
        assert!(!can_read(&c, JOINED, elsewhere));
        assert_eq!(can_write(Some(&c), JOINED, elsewhere), Err(WriteDenial::Scope));
    }

    #[test]
    fn a_missing_channel_and_an_unreadable_one_are_refused_alike() {
        let hidden = channel("private", "stream", false);
        assert_eq!(can_write(None, JOINED, FULL), can_write(Some(&hidden), MEMBER, FULL));
    }
}
