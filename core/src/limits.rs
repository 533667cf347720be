//! Protocol limits, enforced by the gateway and advertised in NIP-11 `limitation`.

use serde::Serialize;

/// The relay's enforced limits, advertised in NIP-11 `limitation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Largest client WebSocket message, checked before parsing.
    pub max_message_length: usize,
    /// Open subscriptions per socket.
    pub max_subscriptions: usize,
    /// Filters per REQ or COUNT.
    pub max_filters: usize,
    /// Largest `limit` a filter may ask for; larger is clamped down to it.
    pub max_limit: u32,
    /// `limit` used when a filter names none.
    pub default_limit: u32,
    /// Longest subscription id.
    pub max_subid_length: usize,
    /// Tags per event.
    pub max_event_tags: usize,
    /// Bytes of event content.
    pub max_content_length: usize,
    /// Largest single tag element (name or value) in bytes.
    pub max_tag_value_length: usize,
    /// Values per filter field (`ids`, `authors`, `kinds`, each `#x`).
    pub max_filter_values: usize,
    /// Whether a socket must authenticate before anything else (NIP-11).
    pub auth_required: bool,
    /// Whether only members may write (NIP-11).
    pub restricted_writes: bool,
    /// Seconds an event's `created_at` may lie ahead of the relay's clock (NIP-11
    /// `created_at_upper_limit`); later is `invalid:`, so no event can sort first forever.
    pub created_at_upper_limit: u64,
    /// NIP-AR artifact queries; advertised in NIP-11 `artifacts`, not in `limitation`.
    #[serde(skip)]
    pub artifacts: ArtifactLimits,
}

/// Limits of NIP-AR artifact queries (`{"artifact":"current"|"history", ...}`), enforced by
/// `Filter::validate` and the query-service, advertised in NIP-11 `artifacts`. Over a limit is an
/// explicit `invalid:` error, never a silently shortened query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArtifactLimits {
    /// Bytes of one tag name after `#` (the tag index bounds names to 64 bytes).
    pub max_tag_name_bytes: usize,
    /// Bytes of one requested tag value.
    pub max_tag_value_bytes: usize,
    /// Bytes of every tag name and value of the query together.
    pub max_total_tag_bytes: usize,
    /// Tag names (`#<name>` predicates) per query.
    pub max_predicates: usize,
    /// Values per tag name.
    pub max_values_per_predicate: usize,
    /// Largest `limit` (page size); a larger one is refused, not clamped.
    pub max_limit: u32,
    /// Page size when the query names no `limit`.
    pub default_limit: u32,
    /// Largest `offset`.
    pub max_offset: u32,
    /// Execution budget of one query in milliseconds (PostgreSQL `statement_timeout`); a query
    /// that exceeds it fails with `error: query exceeded its execution budget`.
    pub execution_budget_ms: u64,
}

impl Default for ArtifactLimits {
    fn default() -> Self {
        Self {
            max_tag_name_bytes: 64,
            max_tag_value_bytes: 1024,
            max_total_tag_bytes: 8192,
            max_predicates: 8,
            max_values_per_predicate: 100,
            max_limit: 500,
            default_limit: 100,
            max_offset: 10_000,
            execution_budget_ms: 2000,
        }
    }
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
            created_at_upper_limit: 900,
            artifacts: ArtifactLimits::default(),
        }
    }
}
