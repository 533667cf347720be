//! Event writes: admission, storage and what is published after commit.

use buzz_bus::{Actor, Audience, BusError, ErrorCode, LiveEvent, Scope, WriteOk};
use buzz_core::Event;
use buzz_store::access::{self, Credential, WriteDenial};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::store::{self, NewChannel};

pub const KIND_DELETION: u32 = 5;
pub const KIND_MESSAGE: u32 = 9;
pub const KIND_PUT_USER: u32 = 9000;
pub const KIND_REMOVE_USER: u32 = 9001;
pub const KIND_EDIT_CHANNEL: u32 = 9002;
pub const KIND_REDACT: u32 = 9005;
pub const KIND_CREATE_CHANNEL: u32 = 9007;
pub const KIND_DELETE_CHANNEL: u32 = 9008;

/// The result of an accepted write: the reply, and what to publish once committed.
pub struct Accepted {
    pub ok: WriteOk,
    /// The accepted event, for live fan-out.
    pub live: Option<LiveEvent>,
    /// Relay-signed events stored with it (39000/39002), also fanned out.
    pub also: Vec<LiveEvent>,
    /// The community's access changed (the channel concerned): gateways drop cached answers.
    pub access_changed: Option<Uuid>,
    /// The stored event's acceptance order.
    pub seq: Option<i64>,
    /// `live.banned` is already filled in (the post path reads it with the channel).
    pub bans_resolved: bool,
}

impl Accepted {
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
    pub keys: &'a buzz_core::Keys,
}

pub(crate) fn denial(d: WriteDenial) -> BusError {
    let (prefix, message) = d.reason();
    let code = if prefix == "blocked" { ErrorCode::Blocked } else { ErrorCode::Restricted };
    BusError::new(code, message)
}

pub(crate) fn credential(actor: &Actor) -> Credential<'_> {
    Credential {
        can_read_messages: actor.has_scope(Scope::MessagesRead),
        can_write_messages: actor.has_scope(Scope::MessagesWrite),
        channel_ids: actor.channel_ids.as_deref(),
    }
}

/// `h` as a lowercase, hyphenated, non-nil UUID.
pub fn channel_tag(event: &Event) -> Result<Uuid, BusError> {
    let h = event.tag_value("h").ok_or_else(|| BusError::invalid("missing h tag"))?;
    parse_uuid(h).ok_or_else(|| BusError::invalid("h must be a lowercase hyphenated non-nil UUID"))
}

#[must_use]
pub fn parse_uuid(s: &str) -> Option<Uuid> {
    let u = Uuid::parse_str(s).ok()?;
    (!u.is_nil() && u.hyphenated().to_string() == s).then_some(u)
}

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

pub(crate) fn duplicate() -> WriteOk {
    WriteOk { duplicate: true, message: "duplicate: already have this event".into(), data: None }
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

pub(crate) async fn store_and_announce(
    tx: &mut PgConnection,
    community: Uuid,
    event: Event,
    channel: &access::Channel,
    thread_root: Option<&str>,
) -> Result<Accepted, BusError> {
    let Some(seq) =
        store::insert_event(tx, community, &event, Some(channel.id), channel.ttl_seconds, thread_root)
            .await
            .map_err(sql)?
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
pub fn live_event(community: Uuid, channel: &access::Channel, event: Event) -> LiveEvent {
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

/// The answer to a write whose database work timed out before its commit: it was rolled back.
pub const BUSY: &str = "database busy, nothing was stored; resubmitting is safe";

/// A failed statement before the commit. A lock wait, a statement or a pool wait over its budget
/// (PostgreSQL 55P03 / 57014, pool timeout) means the transaction never commits: the answer says
/// so. Anything else is `error: storage unavailable`.
pub(crate) fn sql(e: sqlx::Error) -> BusError {
    let timed_out = match &e {
        sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("55P03" | "57014")),
        _ => false,
    };
    if timed_out {
        tracing::warn!(error = %e, "write timed out and was rolled back");
        return BusError::new(ErrorCode::Timeout, BUSY);
    }
    tracing::error!(error = %e, "write failed");
    BusError::unavailable("storage unavailable")
}

/// A failed commit: whether it took effect is unknown to us, so the answer claims nothing
/// (`error:` = outcome unknown; resubmitting the same event is safe, a duplicate is `OK true`).
pub(crate) fn commit_failed(e: sqlx::Error) -> BusError {
    tracing::error!(error = %e, "commit failed");
    BusError::unavailable("storage unavailable")
}
