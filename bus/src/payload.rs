//! Versioned request and reply bodies. Every body is serde JSON; a breaking change gets a new
//! subject version (`v2`), never a silent reinterpretation.

use buzz_core::{ChannelId, CommunityId, Event, EventId, Filter, Pubkey, TokenHash};
use serde::{Deserialize, Serialize};

use crate::error::BusError;

/// Token scopes (contract "Authentication").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// `messages:read`: read events and the chat read model.
    #[serde(rename = "messages:read")]
    MessagesRead,
    /// `messages:write`: publish events and move read markers.
    #[serde(rename = "messages:write")]
    MessagesWrite,
    /// `channels:write`: create and change channels.
    #[serde(rename = "channels:write")]
    ChannelsWrite,
    /// `members:write`: add and remove community members.
    #[serde(rename = "members:write")]
    MembersWrite,
}

impl Scope {
    /// Every scope, in wire order; what a NIP-42/NIP-98 session carries.
    pub const ALL: [Scope; 4] =
        [Self::MessagesRead, Self::MessagesWrite, Self::ChannelsWrite, Self::MembersWrite];
}

/// Who is acting: the authenticated pubkey and what its credential allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The authenticated public key.
    pub pubkey: Pubkey,
    /// Scopes of the credential; NIP-42/NIP-98 sessions carry all of them.
    pub scopes: Vec<Scope>,
    /// A token's channel restriction; `None` means unrestricted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_ids: Option<Vec<ChannelId>>,
    /// The socket or request was admitted with valid federated-identity evidence.
    #[serde(default)]
    pub fi_admitted: bool,
    /// For a NIP-OA agent: the owner whose community membership admits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_of: Option<Pubkey>,
    /// When the credential stops being valid (a token's expiry, unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

impl Actor {
    /// A NIP-42 or NIP-98 session: every scope.
    #[must_use]
    pub fn session(pubkey: Pubkey) -> Self {
        Self {
            pubkey,
            scopes: Scope::ALL.to_vec(),
            channel_ids: None,
            fi_admitted: false,
            agent_of: None,
            expires_at: None,
        }
    }
    /// The key whose community and channel membership count for this actor: the owner of an
    /// agent, else the actor itself.
    #[must_use]
    pub fn member_key(&self) -> &Pubkey {
        self.agent_of.as_ref().unwrap_or(&self.pubkey)
    }
    /// Whether the credential has expired at `now` (unix seconds).
    #[must_use]
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|t| now >= t)
    }
    /// Whether the credential carries `scope`.
    #[must_use]
    pub fn has_scope(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// A member's role in a community (one type for the bus and the store, `buzz_core::domain`).
pub use buzz_core::Role;

/// `buzz.v1.write`: every state change goes through one of these.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WriteRequest {
    /// A verified event (id and signature already checked by the gateway).
    Event {
        /// The community the event is written to.
        community_id: CommunityId,
        /// Who sent it.
        actor: Actor,
        /// The event.
        event: Event,
    },
    /// `POST /api/members`.
    PutMember {
        /// The community.
        community_id: CommunityId,
        /// Who asks (must be allowed to manage members).
        actor: Actor,
        /// The member's key.
        pubkey: Pubkey,
        /// The role to give them.
        role: Role,
    },
    /// `DELETE /api/members/{pubkey}`.
    RemoveMember {
        /// The community.
        community_id: CommunityId,
        /// Who asks (must be allowed to manage members).
        actor: Actor,
        /// The member to remove.
        pubkey: Pubkey,
    },
    /// `POST /api/tokens`: the gateway generated `token_hash` = sha256(token); the token itself
    /// never crosses the bus or reaches storage.
    IssueToken {
        /// The community the token is valid in.
        community_id: CommunityId,
        /// Who asks; the token acts as this key.
        actor: Actor,
        /// sha256 of the token.
        token_hash: TokenHash,
        /// The scopes the token grants.
        scopes: Vec<Scope>,
        /// The channels the token is restricted to; `None` is unrestricted.
        channel_ids: Option<Vec<ChannelId>>,
        /// Lifetime in seconds (1 s to 1 year); `None` is the maximum, one year.
        expires_in: Option<u64>,
    },
    /// `POST /api/channels/{id}/read`.
    MarkRead {
        /// The community.
        community_id: CommunityId,
        /// Whose marker moves.
        actor: Actor,
        /// The channel.
        channel_id: ChannelId,
        /// Event id of the message read up to; the marker never moves back.
        up_to: EventId,
    },
}

/// A successful answer on `buzz.v1.write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteOk {
    /// The event was already stored; nothing was applied again.
    pub duplicate: bool,
    /// Text for the `OK` message (empty on a plain success).
    pub message: String,
    /// Structured result for HTTP callers: [`WriteData::Token`] for `IssueToken`,
    /// [`WriteData::ReadMarker`] for `MarkRead`, `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<WriteData>,
}

/// What a write tells its HTTP caller beyond `OK`. Untagged on the wire: each variant is the plain
/// object it always was, so this typing changed no byte on `buzz.v1.write` (the fields of the two
/// variants are disjoint, so reading back is unambiguous).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WriteData {
    /// An issued token's grant (the token itself never crosses the bus).
    Token(IssuedToken),
    /// A channel's read marker after `MarkRead`.
    ReadMarker(ReadMarker),
}

/// The grant of a token `IssueToken` stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuedToken {
    /// The scopes it carries.
    pub scopes: Vec<Scope>,
    /// Its channel restriction; `None` is unrestricted.
    pub channel_ids: Option<Vec<ChannelId>>,
    /// When it stops being valid (unix seconds).
    pub expires_at: i64,
}

/// The caller's read marker of a channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadMarker {
    /// The channel.
    pub channel_id: ChannelId,
    /// The event id the marker stands at.
    pub read_up_to: EventId,
}

impl WriteOk {
    /// A plain success: applied, not a duplicate, no message, no data.
    #[must_use]
    pub fn applied() -> Self {
        Self { duplicate: false, message: String::new(), data: None }
    }
}

/// What crosses `buzz.v1.write` back.
pub type WriteReply = Result<WriteOk, BusError>;

/// `buzz.v1.query`: results stream to the reply inbox as numbered frames.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryRequest {
    /// The community to read.
    pub community_id: CommunityId,
    /// Who reads; only what they may see matches.
    pub reader: Actor,
    /// NIP-01 filters, OR-ed.
    pub filters: Vec<Filter>,
    /// COUNT or REQ. On the wire still `"count": true|false` (absent is a page), so that this
    /// typing changed no byte of `buzz.v1.query`.
    #[serde(rename = "count", default, with = "query_kind_wire")]
    pub kind: QueryKind,
    /// Names the query for a later [`QueryCancel`]. Absent from a gateway older than
    /// cancellation (its queries run to their end or their budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_id: Option<uuid::Uuid>,
}

/// Queries their requester gave up on (`<p>.v1.query.cancel`, to every query replica): each
/// replica stops the ones it holds, waiting or running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryCancel {
    /// The [`QueryRequest::query_id`]s to stop.
    pub query_ids: Vec<uuid::Uuid>,
}

/// What a query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueryKind {
    /// One number: how many events match (COUNT); answered by one `Count` frame.
    Count,
    /// The matching events (REQ, `POST /query`); answered by `Events` frames and `Done`.
    #[default]
    Page,
}

/// [`QueryKind`] as the `count` boolean of the wire format.
mod query_kind_wire {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::QueryKind;

    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's `with` signature
    pub fn serialize<S: Serializer>(kind: &QueryKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(*kind == QueryKind::Count)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<QueryKind, D::Error> {
        Ok(if bool::deserialize(d)? { QueryKind::Count } else { QueryKind::Page })
    }
}

/// One frame of a streamed query answer. `seq` starts at 0 and increases by one; the receiver
/// treats a gap as an error (NATS core is at-most-once), never as a short result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryFrame {
    /// Position of this frame in the answer, from 0.
    pub seq: u32,
    /// What the frame carries.
    pub body: QueryFrameBody,
}

/// The content of a [`QueryFrame`], tagged by `type` on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum QueryFrameBody {
    /// Stored event JSON, in result order.
    Events {
        /// Each event's stored JSON, as is.
        events: Vec<String>,
    },
    /// The end: `total` events were sent in the frames before this one.
    Done {
        /// How many events the `Events` frames carried in all.
        total: u64,
    },
    /// The whole answer to a COUNT query.
    Count {
        /// How many events match.
        count: u64,
    },
    /// The query failed; the last frame of the answer.
    Error {
        /// Why.
        error: BusError,
    },
}

/// `buzz.v1.access`: what the gateway may not decide alone because it does not hold the data.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AccessRequest {
    /// May this pubkey authenticate to the community, and with which role?
    Member {
        /// The community.
        community_id: CommunityId,
        /// The key that wants to authenticate.
        pubkey: Pubkey,
    },
    /// May this reader read the channel now?
    CanRead {
        /// The community.
        community_id: CommunityId,
        /// Who wants to read.
        reader: Actor,
        /// The channel.
        channel_id: ChannelId,
    },
    /// Which grant does this bearer token (by its sha256 hex) carry, if it is valid now?
    Token {
        /// The community the token was presented to.
        community_id: CommunityId,
        /// sha256 of the presented token.
        token_hash: TokenHash,
    },
}

/// The answer to [`AccessRequest::Member`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MemberReply {
    /// The pubkey's role in the community; `None` is not a member.
    pub role: Option<Role>,
    /// The pubkey is banned from the community (NIP-86 `banpubkey`): it authenticates in no
    /// role, not even as an agent, and no agent authenticates for it. Left out when false, and
    /// false from a query-service that does not know bans (before 0.3.0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub banned: bool,
}

/// The answer to [`AccessRequest::CanRead`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanReadReply {
    /// The reader may read the channel now.
    pub can_read: bool,
}

/// The answer to [`AccessRequest::Token`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenReply {
    /// The actor the token authenticates as (scopes and restriction applied); `None` when the
    /// token is unknown, expired or revoked.
    pub token: Option<Actor>,
}

/// What the access server sends: the reply type of the request it answers, as that type's plain
/// object. Only sent, never read back as this enum: an asker reads its request's reply type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum AccessReply {
    /// To `Member`.
    Member(MemberReply),
    /// To `CanRead`.
    CanRead(CanReadReply),
    /// To `Token`.
    Token(TokenReply),
}

/// `buzz.v1.policy.lease`: the host → community answer gateways cache for at most `lease_ms`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseRequest {
    /// The `Host` the request came in on (the policy-service normalises it).
    pub host: String,
    /// The asking gateway runs with `BUZZ_NIP_FI_MODE=off` and needs no FI policy: the answer
    /// carries the community's identity only, read without the FI bindings and without waiting
    /// for a drain of the host ("off does not require an FI policy read"). Absent (older
    /// gateways): false, the full answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub identity_only: bool,
}

/// The community a host serves, as the policy-service stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommunityLease {
    /// The community's id.
    pub community_id: CommunityId,
    /// The host it is bound to.
    pub host: String,
    /// The owner's key (hex).
    pub owner_pubkey: Pubkey,
    /// The stored policy requires NIP-FI evidence to authenticate.
    pub requires_nip_fi: bool,
    /// The community's policy version, bumped on each policy change (NIP-FI CAS uses it).
    pub policy_generation: i64,
    /// NIP-FI issuers bound to the community (`community_fi_bindings`): evidence must name one.
    #[serde(default)]
    pub fi_issuers: Vec<String>,
    /// The community's own NIP-11 profile, when one is set (0.2.0; absent from 0.1.0
    /// policy-services' replies, and ignored by 0.1.0 gateways).
    #[serde(default, skip_serializing_if = "CommunityProfile::is_empty")]
    pub profile: CommunityProfile,
    /// The community's kind rules (NIP-86 `allowkind`/`disallowkind`; 0.3.0, absent from older
    /// policy-services' replies: no rules).
    #[serde(default, skip_serializing_if = "buzz_core::nip86::KindRules::is_open")]
    pub kinds: buzz_core::nip86::KindRules,
    /// Addresses the community's host refuses (NIP-86 `blockip`; 0.3.0, left out when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_ips: Vec<std::net::IpAddr>,
}

/// What a community's host answers in its NIP-11 document instead of the relay's defaults; each
/// field `None` when unset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommunityProfile {
    /// NIP-11 `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// NIP-11 `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// NIP-11 `icon` (a URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
}

impl CommunityProfile {
    /// No field set.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.name.is_none() && self.description.is_none() && self.icon.is_none()
    }
}

/// The answer to a [`LeaseRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseReply {
    /// The community bound to the host; `None` for an unknown host.
    pub community: Option<CommunityLease>,
    /// How long the gateway may cache this answer, in milliseconds.
    pub lease_ms: u64,
}

/// Who may receive a live event, decided by the write-service from the stored channel at commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Audience {
    /// An open channel: every authenticated community member (subject to token restrictions).
    Community,
    /// Private channel or DM: the gateway asks `buzz.v1.access` (cached per socket, dropped on
    /// `buzz.v1.access.<community>`).
    ChannelMembers,
}

/// `buzz.v1.live.<community>`: an accepted event, published after commit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LiveEvent {
    /// The community the event was written to.
    pub community_id: CommunityId,
    /// The channel it belongs to; `None` for an event outside any channel.
    pub channel_id: Option<ChannelId>,
    /// Who may receive it.
    pub audience: Audience,
    /// The stored event.
    pub event: Event,
    /// The community's access version this write saw (see `AccessChanged`): a gateway whose
    /// cached access answers are older re-checks before delivering.
    #[serde(default)]
    pub access_version: i64,
    /// For an open channel (`Audience::Community`): member keys banned from it, who must not
    /// receive it although they are community members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub banned: Vec<Pubkey>,
    /// NIP-AR: for a revision that replaced a served current revision, and for the kind-45011
    /// removal a move leaves in the source, the replaced revision's tags as `[name, lowercase hex
    /// sha256(first value)]` (its `artifact_current_tags` rows). A live `artifact: current`
    /// subscription whose predicates matched the replaced revision receives the event even when
    /// it no longer matches: that is how a subscriber learns that an artifact left its results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced_tags: Vec<[String; 2]>,
}

/// `buzz.v1.access.<community>`: cached access answers for the community are stale.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AccessChanged {
    /// Channel membership, visibility or archive state changed.
    Channel {
        /// The channel whose access changed.
        channel_id: ChannelId,
    },
    /// A community member was removed: their sockets lose authentication.
    MemberRemoved {
        /// The removed member's key.
        pubkey: Pubkey,
    },
    /// A key was banned from the community (NIP-86 `banpubkey`): its sockets are closed. Sent
    /// after a `MemberRemoved` for the same key, so a previous release's gateway (which cannot
    /// read this variant and logs it) still drops the key's authentication.
    Banned {
        /// The banned key.
        pubkey: Pubkey,
    },
}
