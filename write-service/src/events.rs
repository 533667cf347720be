//! Event writes: admission, storage and what is published after commit.

use buzz_bus::{Actor, Audience, BusError, Scope};
use buzz_core::Event;
use buzz_store::access;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::shared::{
    channel_tag, commit_failed, credential, denial, sql, store_and_announce, Accepted, Relay,
    KIND_CREATE_CHANNEL, KIND_DELETE_CHANNEL, KIND_DELETION, KIND_EDIT_CHANNEL, KIND_MESSAGE, KIND_PUT_USER,
    KIND_REDACT, KIND_REMOVE_USER,
};
use crate::store::{self, NewChannel};

pub async fn write_event(
    pool: &PgPool,
    community: Uuid,
    actor: &Actor,
    event: Event,
    relay: &Relay<'_>,
) -> Result<Accepted, BusError> {
    if event.pubkey != actor.pubkey {
        return Err(BusError::restricted("event pubkey is not the authenticated pubkey"));
    }
    if !matches!(
        event.kind,
        KIND_DELETION
            | KIND_MESSAGE
            | KIND_PUT_USER
            | KIND_REMOVE_USER
            | KIND_EDIT_CHANNEL
            | KIND_REDACT
            | KIND_CREATE_CHANNEL
            | KIND_DELETE_CHANNEL
            | buzz_core::nipar::KIND_REVISION
    ) {
        return Err(BusError::blocked(format!("kind {} is not accepted by this relay", event.kind)));
    }
    let mut tx = pool.begin().await.map_err(sql)?;
    let Some(admission) =
        store::admission(&mut tx, community, &event.id, actor.member_key()).await.map_err(sql)?
    else {
        return Err(BusError::restricted("community is not active"));
    };
    if admission.duplicate {
        return Ok(Accepted::duplicate());
    }
    let Some(role) = admission.role else {
        return Err(BusError::restricted("not a member of this community"));
    };
    let access_version = admission.access_version;
    let mut accepted = match event.kind {
        KIND_CREATE_CHANNEL => create_channel(&mut tx, community, actor, event, relay).await?,
        KIND_MESSAGE => post_message(&mut tx, community, actor, event, &role).await?,
        KIND_DELETION => crate::channels::delete_own(&mut tx, community, actor, event).await?,
        buzz_core::nipar::KIND_REVISION => {
            crate::artifacts::write_revision(&mut tx, community, actor, event, &role, relay).await?
        }
        _ => crate::channels::moderate(&mut tx, community, actor, event, relay).await?,
    };
    let version = match accepted.access_changed {
        Some(_) => access::bump_access_version(&mut tx, community).await.map_err(sql)?,
        None => access_version,
    };
    let bans_resolved = accepted.bans_resolved;
    // The primary event and the relay's own events are usually in one channel: read its bans once.
    let mut bans: Option<(Uuid, Vec<String>)> = None;
    for live in accepted.live.iter_mut().chain(accepted.also.iter_mut()) {
        live.access_version = version;
        if let (Audience::Community, Some(channel), false) = (live.audience, live.channel_id, bans_resolved) {
            if bans.as_ref().is_none_or(|(c, _)| *c != channel) {
                let list = store::banned_members(&mut tx, community, channel).await.map_err(sql)?;
                bans = Some((channel, list));
            }
            live.banned = bans.as_ref().map(|(_, list)| list.clone()).unwrap_or_default();
        }
    }
    tx.commit().await.map_err(commit_failed)?;
    Ok(accepted)
}

async fn post_message(
    tx: &mut PgConnection,
    community: Uuid,
    actor: &Actor,
    event: Event,
    community_role: &str,
) -> Result<Accepted, BusError> {
    let channel_id = channel_tag(&event)?;
    let (channel, standing, banned) =
        access::channel_for_post(tx, community, channel_id, actor.member_key(), Some(community_role))
            .await
            .map_err(sql)?;
    access::can_write(channel.as_ref(), standing, credential(actor)).map_err(denial)?;
    let channel = channel.ok_or_else(BusError::internal)?;
    let root = thread_root(&event)?.map(str::to_owned);
    if let Some(root) = &root {
        if !store::is_anchor(tx, community, channel.id, root).await.map_err(sql)? {
            return Err(BusError::invalid("thread root must be a conversation anchor in this channel"));
        }
    }
    let mut accepted = store_and_announce(tx, community, event, &channel, root.as_deref()).await?;
    if let Some(live) = accepted.live.as_mut().filter(|l| l.audience == Audience::Community) {
        live.banned = banned;
    }
    accepted.bans_resolved = true;
    crate::read_model::on_message(tx, community, &accepted).await?;
    Ok(accepted)
}

/// The anchor of a thread reply: the `e` tag marked `root` (`["e", <id>, <relay>, "root"]`).
/// More than one root, or a malformed id, is invalid.
pub fn thread_root(event: &Event) -> Result<Option<&str>, BusError> {
    let mut roots = event.tags_named("e").filter(|t| t.get(3).map(String::as_str) == Some("root"));
    let Some(first) = roots.next() else { return Ok(None) };
    if roots.next().is_some() {
        return Err(BusError::invalid("a reply names exactly one root"));
    }
    let id = first.get(1).map(String::as_str).unwrap_or_default();
    if !buzz_core::is_lower_hex(id, 64) {
        return Err(BusError::invalid("thread root must be a 64-char lowercase hex event id"));
    }
    Ok(Some(id))
}

/// Kind 9007: `h`, `name`, `visibility` (open/private, default open), `channel_type`
/// (stream/forum/dm, default stream), optional `ttl` seconds; a DM lists its participants in `p`
/// tags, is always private and all its participants are peers.
async fn create_channel(
    tx: &mut PgConnection,
    community: Uuid,
    actor: &Actor,
    event: Event,
    relay: &Relay<'_>,
) -> Result<Accepted, BusError> {
    if !actor.has_scope(Scope::ChannelsWrite) {
        return Err(BusError::restricted("token does not allow creating channels"));
    }
    let id = channel_tag(&event)?;
    let channel_type = event.tag_value("channel_type").unwrap_or("stream");
    if !matches!(channel_type, "stream" | "forum" | "dm") {
        return Err(BusError::invalid("channel_type must be stream, forum or dm"));
    }
    let dm = channel_type == "dm";
    let visibility = match (event.tag_value("visibility"), dm) {
        (None | Some("private"), true) => "private",
        (Some(_), true) => return Err(BusError::invalid("a dm is always private")),
        (None, false) => "open",
        (Some(v @ ("open" | "private")), false) => v,
        (Some(_), false) => return Err(BusError::invalid("visibility must be open or private")),
    };
    let name = event.tag_value("name").map(str::trim).unwrap_or_default();
    if (name.is_empty() && !dm) || name.len() > 256 {
        return Err(BusError::invalid("name must be 1 to 256 bytes"));
    }
    let ttl_seconds = match event.tag_value("ttl") {
        None => None,
        Some(t) => Some(
            t.parse::<i32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| BusError::invalid("ttl must be a positive number of seconds"))?,
        ),
    };
    let mut participants: Vec<String> = vec![actor.member_key().to_owned()];
    if dm {
        for p in event.tags_named("p") {
            let key = p.get(1).map(String::as_str).unwrap_or_default();
            if !buzz_core::is_lower_hex(key, 64) {
                return Err(BusError::invalid("p must be a 64-char lowercase hex pubkey"));
            }
            if access::community_role(tx, community, key).await.map_err(sql)?.is_none() {
                return Err(BusError::invalid("every dm participant must be a community member"));
            }
            if !participants.iter().any(|k| k == key) {
                participants.push(key.to_owned());
            }
        }
        if participants.len() < 2 {
            return Err(BusError::invalid("a dm needs at least one other participant"));
        }
    }
    let new = NewChannel { id, name, visibility, channel_type, ttl_seconds, created_by: &actor.pubkey };
    if !store::create_channel(tx, community, &new).await.map_err(sql)? {
        return Err(BusError::blocked("channel id is not available"));
    }
    if dm {
        store::add_channel_members(tx, community, id, &participants, "member").await.map_err(sql)?;
    } else {
        store::add_channel_members(tx, community, id, &participants, "owner").await.map_err(sql)?;
    }
    let channel =
        access::load_channel(tx, community, id, false).await.map_err(sql)?.ok_or_else(BusError::internal)?;
    let mut accepted = store_and_announce(tx, community, event, &channel, None).await?;
    let kinds = [crate::channels::KIND_CHANNEL_METADATA, crate::channels::KIND_CHANNEL_MEMBERS];
    accepted.also = crate::channels::relay_state(tx, community, &channel, relay, &kinds).await?;
    Ok(accepted)
}
