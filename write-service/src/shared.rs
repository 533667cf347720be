//! What every write path shares: the accepted-write result, the relay's key, the kind numbers,
//! how denials and storage failures are answered, and storing an event for fan-out. It imports
//! nothing from the write paths, so they all depend on it and never on each other's internals.

use buzz_bus::{Actor, Audience, BusError, ErrorCode, LiveEvent, Scope, WriteOk};
use buzz_core::Event;
use buzz_store::access::{self, Credential, WriteDenial};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::store;

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

pub fn duplicate() -> WriteOk {
    WriteOk { duplicate: true, message: "duplicate: already have this event".into(), data: None }
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
