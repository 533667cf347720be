//! NIP-86 `banevent`, `unbanevent`/`allowevent` and `listbannedevents`: a ban is a redaction
//! (`events.redacted_at`) under the channel's message-removal rule of kind 9005
//! (`rules::moderation::decide_redaction`), so the spec's redaction rules hold: the event is
//! withheld from every surface, and a banned artifact revision never changes which revision is
//! current. An event in a channel the caller cannot read is answered as one that does not exist.

use buzz_bus::Actor;
use buzz_core::{ChannelId, CommunityId, EventId, Pubkey};
use buzz_store::access;
use serde_json::{json, Value};
use sqlx::PgConnection;

use crate::channel::sql::{lock_channel, redact_event, redaction_target};
use crate::error::WriteResult;
use crate::manage::sql::{self as mstore, storage};
use crate::rules::manage as rule;
use crate::rules::moderation::{ModerationView, UNRESTRICTED};

/// The removal rule for `author`'s event in `channel_id`, decided on the locked channel; what
/// the caller may not read is "no such event", like an event that does not exist.
async fn may_redact(
    conn: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    channel_id: ChannelId,
    author: &Pubkey,
) -> WriteResult<()> {
    let channel = lock_channel(conn, community, channel_id).await?;
    let standing = access::standing(conn, community, channel_id, actor.member_key()).await?;
    let view =
        ModerationView { channel, standing, redacted_author: Some(author), ..ModerationView::default() };
    Ok(rule::redaction(actor, channel_id, &view)?)
}

/// `banevent`: redacts a live event of a channel and records the ban.
pub async fn ban(
    conn: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    id: &EventId,
    reason: Option<&str>,
) -> WriteResult<()> {
    // An event already redacted (a kind 9005, another ban) may be banned too: each stands alone.
    let (author, channel_id, _) = rule::event_in_channel(redaction_target(conn, community, id).await?)?;
    may_redact(conn, community, actor, channel_id, &author).await?;
    mstore::ban_event(conn, community, id, reason, &actor.pubkey).await.map_err(storage)?;
    redact_event(conn, community, id).await?;
    Ok(())
}

/// `unbanevent`/`allowevent`: lifts a `banevent` under the same rule; a kind-9005 redaction of
/// the same event stands (`channel::sql::lift_ban`). A banned current artifact revision retired its
/// artifact (it left the current-state index); that is not undone here: the artifact comes back
/// with a new revision, so the call is refused saying so.
pub async fn unban(
    conn: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    id: &EventId,
) -> WriteResult<()> {
    let found = mstore::banned_event(conn, community, id).await.map_err(storage)?;
    let (author, channel_id, current) = rule::event_in_channel(found)?;
    may_redact(conn, community, actor, channel_id, &author).await?;
    rule::unban_event(current)?;
    mstore::unban_event(conn, community, id).await?;
    Ok(())
}

/// `listbannedevents`: `[{id, reason}]` of the banned events in channels the caller reads.
pub async fn list(conn: &mut PgConnection, community: CommunityId, actor: &Actor) -> WriteResult<Value> {
    let rows = mstore::banned_events(conn, community).await.map_err(storage)?;
    let mut out = Vec::with_capacity(rows.len());
    for (id, reason, channel_id) in rows {
        let Some(channel_id) = channel_id else { continue };
        let channel = access::load_channel(conn, community, channel_id, false).await?;
        let standing = access::standing(conn, community, channel_id, actor.member_key()).await?;
        if channel.is_some_and(|c| access::can_read(&c, standing, UNRESTRICTED)) {
            out.push(json!({ "id": id, "reason": reason }));
        }
    }
    Ok(Value::Array(out))
}
