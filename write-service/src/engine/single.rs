//! The one-event transaction: every event write that is not batched, and every write a batch
//! hands back. Admission (`rules::admission`), then the event family's [`Family::write`] (load →
//! decide → store, in the transaction), the access version and the bans its live events carry;
//! commits before answering. Which family writes which kind is registered in one place,
//! `family` (`writer.rs`).

use buzz_bus::{Actor, Audience};
use buzz_core::{ChannelId, CommunityId, Event, EventId, Pubkey};
use buzz_store::access::{self, Channel};
use buzz_store::Role;
use futures::future::BoxFuture;
use sqlx::{PgConnection, PgPool};

use crate::engine::{Accepted, Relay};
use crate::error::{WriteError, WriteResult};
use crate::rules::admission::{self, AdmissionView, Admitted};
use crate::store;

/// What a family's step comes to, once it has run in the transaction: the write's answer.
pub type Written<'a> = BoxFuture<'a, WriteResult<Accepted>>;

/// An event family's steps in the one-event transaction, once the event is admitted.
pub trait Family: Sync {
    /// Gathers what the family's rules need, applies their decision and stores the event, in
    /// `tx`. `role` is the writer's (member key's) community role.
    fn write<'a>(&'a self, tx: &'a mut PgConnection, w: One<'a>, role: Role) -> Written<'a>;

    /// An event already accepted, sent again: `duplicate:`, unless the family has more to do
    /// (`role`: the writer's community role, if still a member; `access_version`: the
    /// community's).
    fn again<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        w: One<'a>,
        role: Option<Role>,
        access_version: i64,
    ) -> Written<'a> {
        let _ = (tx, w, role, access_version);
        Box::pin(async { Ok(Accepted::duplicate()) })
    }
}

/// An event to write, as a family gets it.
pub struct One<'a> {
    /// The community written to.
    pub community: CommunityId,
    /// Who writes (an agent acts with its owner's membership).
    pub actor: &'a Actor,
    /// The event.
    pub event: Event,
    /// The relay's key, for the events the relay signs with it (39000/39002, a move's 45011).
    pub relay: &'a Relay<'a>,
}

/// Writes one client event in one transaction: admission (community active, already accepted
/// or deleted by its author, membership), `family`'s steps, the access version and bans its live
/// events carry; commits before answering.
#[tracing::instrument(
    name = "db.transaction",
    skip_all,
    fields(db.system = "postgresql", db.operation = "write_event", otel.kind = "client")
)]
pub async fn write_event(
    pool: &PgPool,
    community: CommunityId,
    actor: &Actor,
    event: Event,
    relay: &Relay<'_>,
    family: &dyn Family,
) -> WriteResult<Accepted> {
    // What needs no database is answered before a transaction is opened.
    admission::sender(&event, actor)?;
    let mut tx = pool.begin().await?;
    let bans = buzz_store::bans::table_exists(pool, &mut tx).await?;
    let keys = (actor.member_key(), &actor.pubkey);
    let (view, access_version) = admission_view(&mut tx, community, &event.id, keys, bans).await?;
    let admitted = admission::admit(&event, actor, &view)?;
    let one = One { community, actor, event, relay };
    let mut accepted = match admitted {
        Admitted::Duplicate => return family.again(&mut tx, one, view.role, access_version).await,
        Admitted::Member(role) => family.write(&mut tx, one, role).await?,
    };
    let version = match accepted.access_changed {
        Some(_) => access::bump_access_version(&mut tx, community).await?,
        None => access_version,
    };
    let bans_resolved = accepted.bans_resolved;
    // The primary event and the relay's own events are usually in one channel: read its bans once.
    let mut bans: Option<(ChannelId, Vec<Pubkey>)> = None;
    for live in accepted.live.iter_mut().chain(accepted.also.iter_mut()) {
        live.access_version = version;
        if let (Audience::Community, Some(channel), false) = (live.audience, live.channel_id, bans_resolved) {
            if bans.as_ref().is_none_or(|(c, _)| *c != channel) {
                let list = banned_members(&mut tx, community, channel).await?;
                bans = Some((channel, list));
            }
            live.banned = bans.as_ref().map(|(_, list)| list.clone()).unwrap_or_default();
        }
    }
    tx.commit().await.map_err(WriteError::Commit)?;
    Ok(accepted)
}

/// Stores `event` in `channel` (a reply in `thread_root`'s thread) and answers it with its live event;
/// an event stored meanwhile by a concurrent write is a duplicate.
pub async fn store_and_announce(
    tx: &mut PgConnection,
    community: CommunityId,
    event: Event,
    channel: &Channel,
    thread_root: Option<&EventId>,
) -> WriteResult<Accepted> {
    let inserted =
        store::insert_event(tx, community, &event, Some(channel.id), channel.ttl_seconds, thread_root);
    match inserted.await? {
        Some(seq) => Ok(Accepted::stored(community, channel, event, seq)),
        None => Ok(Accepted::duplicate()),
    }
}

/// Keys banned from a channel (removed by a moderator), who must not get its live events.
async fn banned_members(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
) -> Result<Vec<Pubkey>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT pubkey FROM channel_members WHERE community_id = $1 AND channel_id = $2 AND banned",
    )
    .bind(community)
    .bind(channel)
    .fetch_all(conn)
    .await
}

/// What every event write needs to know first, in one round trip (`rules::admission::admit`):
/// whether the community is active, whether this exact event was already accepted (stored, or a
/// NIP-AR revision whose event retention has since removed) and whether its author has deleted
/// it since (kind 5), the writer's (`member`'s) community role, and, when `bans` (migration 0004
/// has run: `buzz_store::bans::table_exists`), whether `member` or the signing key `writer` is
/// banned; with the community's access version, which live events carry (0 for an inactive
/// community).
async fn admission_view(
    conn: &mut PgConnection,
    community: CommunityId,
    event_id: &EventId,
    (member, writer): (&Pubkey, &Pubkey),
    bans: bool,
) -> Result<(AdmissionView, i64), sqlx::Error> {
    let banned = if bans {
        "EXISTS (SELECT 1 FROM community_bans b WHERE b.community_id = c.id AND b.pubkey IN ($3, $4))"
    } else {
        // Nobody is banned before 0004; `$4` is still named, as every bound value must be.
        "$4::text IS NULL"
    };
    let row: Option<(i64, bool, bool, Option<Role>, bool)> = sqlx::query_as(&format!(
        "SELECT c.access_version, \
                EXISTS (SELECT 1 FROM events e WHERE e.community_id = c.id AND e.id = $2) \
                OR EXISTS (SELECT 1 FROM artifact_revisions r WHERE r.community_id = c.id AND r.revision_id = $2), \
                EXISTS (SELECT 1 FROM events e WHERE e.community_id = c.id AND e.id = $2 AND e.deleted_at IS NOT NULL), \
                (SELECT m.role FROM community_members m WHERE m.community_id = c.id AND m.pubkey = $3), \
                {banned} \
         FROM communities c WHERE c.id = $1 AND c.lifecycle = 'active'"
    ))
    .bind(community)
    .bind(event_id)
    .bind(member)
    .bind(writer)
    .fetch_optional(conn)
    .await?;
    Ok(row.map_or((AdmissionView::default(), 0), |(access_version, duplicate, deleted, role, banned)| {
        (AdmissionView { active: true, duplicate, deleted, role, banned }, access_version)
    }))
}
