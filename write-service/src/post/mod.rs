//! Kind 9, posts and thread replies. One post's steps are here (the [`Family`] the one-event
//! transaction calls); their group commit, the hot path, is `batch.rs`; the statements only
//! posts make are `sql.rs`. Both paths gather the views of the same rules (`rules::admission`,
//! then `rules::post`: `h`, the write rule there, the thread root) and apply their decision.
//!
//! A stored post also records one mention per distinct `p` tag naming a community member other
//! than the author, and moves its author's read marker to it (posting marks the channel read), in
//! the post's transaction, so a post is never visible without its mentions.

pub mod batch;
pub mod sql;

use buzz_bus::Audience;
use buzz_store::access::{self, Standing};
use buzz_store::Role;
use sqlx::PgConnection;

use crate::engine::single::{store_and_announce, Family, One, Written};
use crate::engine::{live_event, Accepted};
use crate::error::WriteResult;
use crate::read_marks;
use crate::rules::admission::ChannelView;
use crate::rules::post::{self, Named};
use crate::store;

/// Kind 9, registered for the one-event transaction and for group commit.
pub struct Posts;

impl Family for Posts {
    fn write<'a>(&'a self, tx: &'a mut PgConnection, w: One<'a>, role: Role) -> Written<'a> {
        Box::pin(post_message(tx, w, role))
    }

    fn again<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        w: One<'a>,
        role: Option<Role>,
        access_version: i64,
    ) -> Written<'a> {
        Box::pin(announce_again(tx, w, role, access_version))
    }
}

/// How long after its acceptance a resent post is announced again.
const ANNOUNCE_AGAIN_WITHIN_SECS: f64 = 60.0;

/// A post already stored, sent again: `duplicate:`, and announced again (live) when it was
/// accepted within the last minute. The replica that committed it may have died before publishing
/// it (the writer got `error:` or lost its socket, and resent); the resend is then its
/// subscribers' only chance to get it live. A subscriber may receive it twice (clients drop a
/// repeated id), never silently not at all. An older resend (a client replaying its history) is
/// only answered. (A batch hands every duplicate post back to be written alone, so it comes here.)
async fn announce_again(
    tx: &mut PgConnection,
    w: One<'_>,
    role: Option<Role>,
    access_version: i64,
) -> WriteResult<Accepted> {
    let mut accepted = Accepted::duplicate();
    let One { community, actor, event, .. } = w;
    if !sql::accepted_within(tx, community, &event.id, ANNOUNCE_AGAIN_WITHIN_SECS).await? {
        return Ok(accepted);
    }
    let Ok(channel) = Named::parse(&event).channel else { return Ok(accepted) };
    let (Some(channel), _, banned) =
        access::channel_for_post(tx, community, channel, actor.member_key(), role).await?
    else {
        return Ok(accepted);
    };
    let mut live = live_event(community, &channel, event);
    live.access_version = access_version;
    if live.audience == Audience::Community {
        live.banned = banned;
    }
    accepted.live = Some(live);
    Ok(accepted)
}

/// Gathers the channel of `h` (share-locked) and whether the thread root is an anchor there,
/// applies `rules::post::decide`, stores the post, its mentions and its author's read marker.
async fn post_message(tx: &mut PgConnection, w: One<'_>, community_role: Role) -> WriteResult<Accepted> {
    let One { community, actor, event, .. } = w;
    let named = Named::parse(&event);
    let (channel, standing, banned) = match named.channel {
        Ok(id) => {
            access::channel_for_post(tx, community, id, actor.member_key(), Some(community_role)).await?
        }
        Err(_) => (None, Standing::default(), Vec::new()),
    };
    let anchor = match (&channel, &named.root) {
        (Some(c), Ok(Some(root))) => store::is_anchor(tx, community, c.id, root).await?,
        _ => false,
    };
    let (channel, root) = post::decide(&named, ChannelView { channel, standing }, anchor, actor)?;
    let mut accepted = store_and_announce(tx, community, event, &channel, root.as_ref()).await?;
    if let Some(live) = accepted.live.as_mut().filter(|l| l.audience == Audience::Community) {
        live.banned = banned;
    }
    accepted.bans_resolved = true;
    if let (Some(seq), Some(live)) = (accepted.seq, accepted.live.as_ref()) {
        let event = &live.event;
        store::record_mentions(tx, community, channel.id, event, seq, &store::mentioned(event)).await?;
        read_marks::sql::advance_marker(tx, community, channel.id, &event.pubkey, seq, &event.id).await?;
    }
    Ok(accepted)
}
