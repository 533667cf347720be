//! Protocol limits, enforced by the gateway and advertised in NIP-11 `limitation`.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Largest client WebSocket message, checked before parsing.
    pub max_message_length: usize,
    pub max_subscriptions: usize,
    pub max_filters: usize,
    /// Largest `limit` a filter may ask for; larger is clamped down to it.
    pub max_limit: u32,
    /// `limit` used when a filter names none.
    pub default_limit: u32,
    pub max_subid_length: usize,
    pub max_event_tags: usize,
    pub max_content_length: usize,
    /// Largest single tag element (name or value) in bytes.
    pub max_tag_value_length: usize,
    /// Values per filter field (`ids`, `authors`, `kinds`, each `#x`).
    pub max_filter_values: usize,
    pub auth_required: bool,
    pub restricted_writes: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_length: 131_072,
            max_subscriptions: 32,
            max_filters: 10,
            max_limit: 500,
            default_limit: 100,
            max_subid_length: 64,
            max_event_tags: 256,
            max_content_length: 65_536,
            max_tag_value_length: 1024,
            max_filter_values: 256,
            auth_required: true,
            restricted_writes: true,
        }
    }
}
