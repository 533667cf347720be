//! Versioned request and reply bodies. Every body is serde JSON; a breaking change gets a new
//! subject version (`v2`), never a silent reinterpretation.

use buzz_core::{Event, Filter};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::BusError;

/// Token scopes (contract "Authentication").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scope {
    #[serde(rename = "messages:read")]
    MessagesRead,
    #[serde(rename = "messages:write")]
    MessagesWrite,
    #[serde(rename = "channels:write")]
    ChannelsWrite,
    #[serde(rename = "members:write")]
    MembersWrite,
}

impl Scope {
    pub const ALL: [Scope; 4] =
        [Self::MessagesRead, Self::MessagesWrite, Self::ChannelsWrite, Self::MembersWrite];
}

/// Who is acting: the authenticated pubkey and what its credential allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub pubkey: String,
    /// Scopes of the credential; NIP-42/NIP-98 sessions carry all of them.
    pub scopes: Vec<Scope>,
    /// A token's channel restriction; `None` means unrestricted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_ids: Option<Vec<Uuid>>,
    /// The socket or request was admitted with valid federated-identity evidence.
    #[serde(default)]
    pub fi_admitted: bool,
    /// For a NIP-OA agent: the owner whose community membership admits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_of: Option<String>,
    /// When the credential stops being valid (a token's expiry, unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

impl Actor {
    /// A NIP-42 or NIP-98 session: every scope.
    #[must_use]
    pub fn session(pubkey: String) -> Self {
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
    pub fn member_key(&self) -> &str {
        self.agent_of.as_deref().unwrap_or(&self.pubkey)
    }
    /// Whether the credential has expired at `now` (unix seconds).
    #[must_use]
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|t| now >= t)
    }
    #[must_use]
    pub fn has_scope(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Member,
    Admin,
    Owner,
}

impl Role {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::Admin => "admin",
            Self::Owner => "owner",
        }
    }
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "member" => Some(Self::Member),
            "admin" => Some(Self::Admin),
            "owner" => Some(Self::Owner),
            _ => None,
        }
    }
}

/// `buzz.v1.write`: every state change goes through one of these.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WriteRequest {
    /// A verified event (id and signature already checked by the gateway).
    Event { community_id: Uuid, actor: Actor, event: Event },
    /// `POST /api/members`.
    PutMember { community_id: Uuid, actor: Actor, pubkey: String, role: Role },
    /// `DELETE /api/members/{pubkey}`.
    RemoveMember { community_id: Uuid, actor: Actor, pubkey: String },
    /// `POST /api/tokens`: the gateway generated `token_hash` = sha256(token); the token itself
    /// never crosses the bus or reaches storage.
    IssueToken {
        community_id: Uuid,
        actor: Actor,
        token_hash: String,
        scopes: Vec<Scope>,
        channel_ids: Option<Vec<Uuid>>,
        expires_in: Option<u64>,
    },
    /// `POST /api/channels/{id}/read`.
    MarkRead { community_id: Uuid, actor: Actor, channel_id: Uuid, up_to: String },
}

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
    pub channel_ids: Option<Vec<Uuid>>,
    /// When it stops being valid (unix seconds).
    pub expires_at: i64,
}

/// The caller's read marker of a channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadMarker {
    /// The channel.
    pub channel_id: Uuid,
    /// The event id the marker stands at.
    pub read_up_to: String,
}

impl WriteOk {
    #[must_use]
    pub fn applied() -> Self {
        Self { duplicate: false, message: String::new(), data: None }
    }
}

pub type WriteReply = Result<WriteOk, BusError>;

/// `buzz.v1.query`: results stream to the reply inbox as numbered frames.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryRequest {
    pub community_id: Uuid,
    pub reader: Actor,
    pub filters: Vec<Filter>,
    /// COUNT or REQ. On the wire still `"count": true|false` (absent is a page), so that this
    /// typing changed no byte of `buzz.v1.query`.
    #[serde(rename = "count", default, with = "query_kind_wire")]
    pub kind: QueryKind,
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
    pub seq: u32,
    pub body: QueryFrameBody,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum QueryFrameBody {
    /// Stored event JSON, in result order.
    Events {
        events: Vec<String>,
    },
    /// The end: `total` events were sent in the frames before this one.
    Done {
        total: u64,
    },
    Count {
        count: u64,
    },
    Error {
        error: BusError,
    },
}

/// `buzz.v1.access`: what the gateway may not decide alone because it does not hold the data.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AccessRequest {
    /// May this pubkey authenticate to the community, and with which role?
    Member { community_id: Uuid, pubkey: String },
    /// May this reader read the channel now?
    CanRead { community_id: Uuid, reader: Actor, channel_id: Uuid },
    /// Which grant does this bearer token (by its sha256 hex) carry, if it is valid now?
    Token { community_id: Uuid, token_hash: String },
}

/// The answer to [`AccessRequest::Member`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberReply {
    /// The pubkey's role in the community; `None` is not a member.
    pub role: Option<Role>,
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
    pub host: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommunityLease {
    pub community_id: Uuid,
    pub host: String,
    pub owner_pubkey: String,
    pub requires_nip_fi: bool,
    pub policy_generation: i64,
    /// NIP-FI issuers bound to the community (`community_fi_bindings`): evidence must name one.
    #[serde(default)]
    pub fi_issuers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseReply {
    pub community: Option<CommunityLease>,
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
    pub community_id: Uuid,
    pub channel_id: Option<Uuid>,
    pub audience: Audience,
    pub event: Event,
    /// The community's access version this write saw (see `AccessChanged`): a gateway whose
    /// cached access answers are older re-checks before delivering.
    #[serde(default)]
    pub access_version: i64,
    /// For an open channel (`Audience::Community`): member keys banned from it, who must not
    /// receive it although they are community members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub banned: Vec<String>,
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
    Channel { channel_id: Uuid },
    /// A community member was removed: their sockets lose authentication.
    MemberRemoved { pubkey: String },
}
