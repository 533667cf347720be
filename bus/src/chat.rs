//! `buzz.v1.chat`: the chat read model's requests and their replies (served by the query-service).

use buzz_core::{ChannelId, CommunityId, EventId};
use serde::{Deserialize, Serialize};

use crate::error::BusError;
use crate::payload::Actor;

/// `buzz.v1.chat`: the chat read model (served by the query-service).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChatRequest {
    /// `GET /api/channels/{id}/summary`.
    Summary {
        /// The community the channel belongs to.
        community_id: CommunityId,
        /// Who asks; the summary counts only what they can read, and their own marker.
        reader: Actor,
        /// The channel to summarise.
        channel_id: ChannelId,
    },
    /// `GET /api/mentions`.
    Mentions {
        /// The community to search.
        community_id: CommunityId,
        /// Who asks; mentions of their key in channels they can read.
        reader: Actor,
        /// Most mentions to return.
        limit: u32,
    },
}

impl ChatRequest {
    /// The community the request reads.
    #[must_use]
    pub fn community_id(&self) -> CommunityId {
        match self {
            Self::Summary { community_id, .. } | Self::Mentions { community_id, .. } => *community_id,
        }
    }
}

/// The answer to a [`ChatRequest`], as the plain object of its request's reply type (untagged: the
/// wire is the JSON the HTTP API answers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ChatAnswer {
    /// To `Summary`.
    Summary(ChannelSummary),
    /// To `Mentions`.
    Mentions(MentionsPage),
}

/// What crosses `buzz.v1.chat` back.
pub type ChatReply = Result<ChatAnswer, BusError>;

/// `GET /api/channels/{id}/summary` (docs in `query-service/src/chat.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelSummary {
    /// The summarised channel.
    pub channel_id: ChannelId,
    /// Visible messages, replies included.
    pub message_count: u64,
    /// Visible messages after the caller's marker not authored by them.
    pub unread: u64,
    /// The caller's mentions after the marker.
    pub mentions: u64,
    /// `{anchor event id: visible replies}` for anchors with at least one.
    pub replies: std::collections::BTreeMap<EventId, u64>,
    /// The caller's marker; `None` before their first `read`.
    pub read_up_to: Option<EventId>,
}

/// `GET /api/mentions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MentionsPage {
    /// Newest first.
    pub mentions: Vec<Mention>,
}

/// One mention of the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mention {
    /// Id of the mentioning event.
    pub event_id: EventId,
    /// The channel the mentioning event is in.
    pub channel_id: ChannelId,
    /// At or before the caller's marker of the channel.
    pub read: bool,
    /// The mentioning event, its stored JSON as is (parsed, never re-encoded from an event type).
    pub event: serde_json::Value,
}
