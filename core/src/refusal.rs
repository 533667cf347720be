//! The texts more than one service answers with, spelled once. Each is the text after the NIP-01
//! prefix (or the HTTP body's `error`); the prefix is the answering service's, from its
//! [`ErrorCode`](crate::ErrorCode), so one text may stand under two prefixes. A text only one
//! service answers with stays in that service (the write-service's in its `rules::refusal`).

/// A credential without `messages:read`: the query-service (reads, chat read model), the
/// snapshot-service, and the write-service for a read marker.
pub const READ_SCOPE: &str = "token does not allow reading messages";

/// A channel that does not exist or that the caller cannot see (the two are answered alike): the
/// write-service's write rule and read markers, the query-service's chat read model.
pub const CHANNEL_NOT_FOUND: &str = "channel not found or not accessible";

/// A key that is no member of the community: the gateway's AUTH and query API, the
/// snapshot-service, the write-service's admission.
pub const NOT_COMMUNITY_MEMBER: &str = "not a member of this community";

/// An event signed by another key than the authenticated one: the gateway, before the bus, and
/// the write-service's admission.
pub const WRONG_AUTHOR: &str = "event pubkey is not the authenticated pubkey";

/// A role other than member or admin: the gateway's `POST /api/members`, the write-service's
/// kind 9000.
pub const MEMBER_OR_ADMIN: &str = "role must be member or admin";

/// A pubkey that is not 64 lowercase hex: a client message's event, the gateway's members API.
pub const BAD_PUBKEY: &str = "pubkey must be 64 lowercase hex";

/// A database failure, answered without naming anything of the store: the write-service and the
/// query-service.
pub const STORAGE_UNAVAILABLE: &str = "storage unavailable";

/// A bus request that failed in transit: the bus client and the gateway's streamed queries.
pub const BUS_UNAVAILABLE: &str = "the bus is unavailable";

/// A streamed query over its time: the bus client and the gateway's streamed queries.
pub const QUERY_TIMEOUT: &str = "the query did not complete in time";

/// A bug or an unexpected failure; details go to the logs: the bus, the HTTP JSON contract, the
/// gateway's token route.
pub const INTERNAL: &str = "internal error";
