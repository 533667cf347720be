//! NIP-AR revisions (kind 45010) one at a time: identity, compare-and-swap, moves,
//! delete/restore, mentions. The rules are `rules::revision`'s; this path gathers their views in
//! one transaction per revision, in this order:
//!
//! 1. Admission (`events::write_event`), as for every kind: an already accepted event id (stored,
//!    or a revision whose event retention removed) is `OK true` (`duplicate:`) whatever has
//!    happened since and whatever the sender may still read, since it tells nothing newer; then
//!    community membership. The envelope is validated without I/O (`buzz_core::nipar::parse`).
//! 2. Access, exactly the kind-9 check at the kind-9 point: write in the channel the revision names
//!    (`h`, a move's destination), before anything about the artifact is looked at, so a sender
//!    who could not post a kind 9 there gets the kind-9 answer whatever the artifact's state.
//! 3. Identity and CAS under the artifact row lock: a create claims `(community, d)` (a taken d is
//!    a conflict, deleted ones included); any other op locks the row `FOR UPDATE` (an unknown d is
//!    answered as a stale prev). A revision id accepted meanwhile (a concurrent resubmission) is
//!    `duplicate:`. When the artifact lives in another channel than `h` (a move's source, or an
//!    update naming the wrong h), the kind-9 check runs there too, before `prev` is compared with
//!    the current revision.
//! 4. Rules that describe the stored artifact (deleted, type, home, root), now that the sender
//!    is known to be able to write where it lives.
//! 5. Store the revision in `events` (channel = its `h`), advance the artifact and its
//!    current-tag index (`artifact_current_tags`), record the revision id forever, mention only
//!    the `p` keys the previous revision did not carry, and for a move store the relay-signed
//!    kind-45011 removal in the source.
//!
//! Timestamps never decide anything here.

pub mod retention;
pub(crate) mod sql;

use buzz_bus::{Actor, Audience, LiveEvent, WriteOk};
use buzz_core::nipar::{self, Envelope, Op};
use buzz_core::{ChannelId, CommunityId, Event, Pubkey};
use buzz_store::access::{self, Channel};
use buzz_store::Role;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::WriteResult;
use crate::rules::admission::{self, ChannelView};
use crate::rules::revision::{self, ArtifactView, Identity};
use crate::rules::Refusal;
use crate::shared::{live_event, Accepted, Relay};

pub use retention::sweep_retention;
pub use sql::Artifact;

/// A channel the sender may post in (the kind-9 rule), share-locked, with its banned keys.
struct Writable {
    channel: Channel,
    banned: Vec<Pubkey>,
}

/// Gathers the channel's view and applies the kind-9 write rule (`rules::admission::writable`).
async fn writable(
    tx: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    community_role: Role,
    channel_id: ChannelId,
) -> WriteResult<Writable> {
    let (channel, standing, banned) =
        access::channel_for_post(tx, community, channel_id, actor.member_key(), Some(community_role)).await?;
    let channel = admission::writable(Ok(channel_id), ChannelView { channel, standing }, actor)?;
    Ok(Writable { channel, banned })
}

fn announce(community: CommunityId, at: &Writable, event: Event) -> LiveEvent {
    let mut live = live_event(community, &at.channel, event);
    if live.audience == Audience::Community {
        live.banned.clone_from(&at.banned);
    }
    live
}

/// Kind 45010. `community_role` is the sender's (member key's) community role. Gathers each
/// view in the order the rules (`rules::revision`) need it and applies them.
pub async fn write_revision(
    tx: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    event: Event,
    community_role: Role,
    relay: &Relay<'_>,
) -> WriteResult<Accepted> {
    let env = nipar::parse(&event).map_err(Refusal::Envelope)?;
    // 2. The kind-9 write check on the channel the revision names, where a kind 9 has it: before
    //    anything about the artifact is looked at.
    let named = writable(tx, community, actor, community_role, env.h).await?;
    // 3. Identity and CAS, under the artifact row lock.
    let (claimed, row, accepted) = lock_artifact(tx, community, &env, &event).await?;
    let view = ArtifactView { claimed, current: row.as_ref().map(Artifact::current), accepted };
    let current = match revision::identity(&env, &view)? {
        Identity::Duplicate => return Ok(Accepted::duplicate()),
        Identity::Created => None,
        Identity::Existing(_) => row.as_ref(),
    };
    let seen = current.map(Artifact::current);
    // The artifact lives in another channel (a move's source, or an update naming the wrong h):
    // the sender must be able to write there too before its state is answered.
    let source = match seen.as_ref().and_then(|row| revision::source(&env, row)) {
        Some(home) => Some(writable(tx, community, actor, community_role, home).await?),
        None => None,
    };
    let anchor = match revision::anchor_needed(&env, seen.as_ref()) {
        Some(root) => crate::store::is_anchor(tx, community, env.h, root).await?,
        None => false,
    };
    revision::advance(&env, seen.as_ref(), anchor)?;
    let revision = Revision { env: &env, event };
    store(tx, community, revision, current, &named, source.as_ref(), relay).await
}

/// What the artifact row says under its lock (`rules::revision::ArtifactView`): a create claims
/// its d; a taken d (a lost race included) waits for and locks the winner; then whether this
/// revision id was accepted meanwhile (a concurrent resubmission). Returns (claimed, locked row,
/// accepted).
async fn lock_artifact(
    tx: &mut PgConnection,
    community: CommunityId,
    env: &Envelope,
    event: &Event,
) -> Result<(bool, Option<Artifact>, bool), sqlx::Error> {
    if env.op == Op::Create && sql::claim(tx, community, env, &event.id, &p_keys(event)).await? {
        return Ok((true, None, false));
    }
    let row = sql::lock(tx, community, env.d).await?;
    let accepted = sql::accepted(tx, community, &event.id).await?;
    Ok((false, row, accepted))
}

/// An admitted revision and its parsed envelope.
struct Revision<'a> {
    env: &'a Envelope,
    event: Event,
}

/// Step 5: stores the revision in `at` (its h), advances the artifact and its current-tag
/// index, records the revision id, its new mentions, and for a move the removal left in `source`.
async fn store(
    tx: &mut PgConnection,
    community: CommunityId,
    revision: Revision<'_>,
    current: Option<&Artifact>,
    at: &Writable,
    source: Option<&Writable>,
    relay: &Relay<'_>,
) -> WriteResult<Accepted> {
    let Revision { env, event } = revision;
    // Every `p` key the revision carries (its author's too: carried over, it must not mention
    // them when someone else writes the next revision), and the ones it may mention.
    let carried = p_keys(&event);
    let mentioned = crate::read_model::mentioned(&event);
    // The id is not in artifact_revisions (checked under the lock), so it cannot be stored yet;
    // if it were, the store is inconsistent and the whole transaction rolls back.
    let seq =
        crate::store::insert_event(tx, community, &event, Some(at.channel.id), at.channel.ttl_seconds, None)
            .await?
            .ok_or_else(buzz_bus::BusError::internal)?;
    if current.is_some() {
        sql::advance(tx, community, env, &event.id, &carried).await?;
    }
    let before = sql::index_current_tags(
        tx,
        community,
        env.d,
        &current_tag_rows(&event),
        current.map(|row| &row.current_revision),
    )
    .await?;
    let replaced = replaced_tags(env.d, &env.type_name, before);
    sql::record(tx, community, env, &event.id, seq).await?;
    let added: Vec<Pubkey> = match current {
        Some(row) => mentioned.iter().filter(|k| !row.mentioned.contains(k)).cloned().collect(),
        None => mentioned,
    };
    crate::read_model::record_mentions(tx, community, at.channel.id, &event, seq, &added).await?;
    let mut also = Vec::new();
    if let (Some(row), Some(home)) = (current, source) {
        let removal = removal(relay, env, &row.current_revision, home.channel.id);
        crate::store::insert_event(
            tx,
            community,
            &removal,
            Some(home.channel.id),
            home.channel.ttl_seconds,
            None,
        )
        .await?
        .ok_or_else(buzz_bus::BusError::internal)?;
        let mut live = announce(community, home, removal);
        live.replaced_tags.clone_from(&replaced);
        also.push(live);
    }
    let mut live = announce(community, at, event);
    live.replaced_tags = replaced;
    Ok(Accepted {
        ok: WriteOk::applied(),
        live: Some(live),
        also,
        access_changed: None,
        seq: Some(seq),
        bans_resolved: true,
    })
}

/// The current-tag rows of revision `event` were it current and served: its distinct
/// `(name, sha256(first value))` pairs but `buzz_store::current_tags::DERIVED`.
pub(crate) fn current_tag_rows(event: &Event) -> Vec<(&str, Vec<u8>)> {
    let rows: std::collections::BTreeSet<(&str, Vec<u8>)> =
        crate::store::indexed_tags(event, |name| !buzz_store::current_tags::is_derived(name)).collect();
    rows.into_iter().collect()
}

/// An artifact's `replaced_tags` (the live payload) from the current-tag rows it had before a
/// revision and the `op` and `prev` rows of the revision they belonged to: when it was served (it had a row
/// that is not derived, as its `h` row always is), those rows with the derived `ar`, `d` and
/// `type` rows added (`buzz_store::current_tags`; `type_name` is the artifact's, immutable), as
/// `[name, hex(sha256(value))]` sorted; else none.
pub(crate) fn replaced_tags(d: Uuid, type_name: &str, mut rows: Vec<(String, Vec<u8>)>) -> Vec<[String; 2]> {
    if !rows.iter().any(|(name, _)| !buzz_store::current_tags::is_derived(name)) {
        return Vec::new();
    }
    rows.extend(buzz_store::current_tags::derived_rows(d, type_name));
    rows.sort_unstable();
    rows.into_iter().map(|(name, hash)| [name, hex::encode(hash)]).collect()
}

/// The distinct well-formed `p` pubkeys of a revision, sorted.
pub(crate) fn p_keys(event: &Event) -> Vec<Pubkey> {
    let mut keys: Vec<Pubkey> = event.tags_named("p").filter_map(|t| Pubkey::parse(t.get(1)?).ok()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The relay-signed kind-45011 removal a move leaves in the source (`nipar::removal_tags`).
fn removal(relay: &Relay<'_>, env: &Envelope, replaced: &str, source: ChannelId) -> Event {
    relay.keys.sign_new(nipar::KIND_REMOVAL, nipar::removal_tags(env.d, source, replaced), "")
}
