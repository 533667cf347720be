//! The NIP-86 rules a host lease carries (kind rules, blocked addresses), from the community's
//! columns as read through `to_jsonb` of its row (`NULL` before migration 0004 and when unset).

/// One `blocked_ips` entry (the reason is not needed for a lease).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct BlockedIp {
    /// The address.
    pub ip: std::net::IpAddr,
}

/// The addresses of the `blocked_ips` column as read through `to_jsonb` (`NULL`: none).
#[must_use]
pub fn blocked(column: Option<&sqlx::types::Json<Vec<BlockedIp>>>) -> Vec<std::net::IpAddr> {
    column.map(|j| j.0.iter().map(|b| b.ip).collect()).unwrap_or_default()
}

/// Kind rules from the two columns as read through `to_jsonb` (`NULL`: none).
#[must_use]
pub fn kind_rules(
    allowed: Option<&sqlx::types::Json<Vec<u32>>>,
    disallowed: Option<&sqlx::types::Json<Vec<u32>>>,
) -> buzz_core::nip86::KindRules {
    buzz_core::nip86::KindRules {
        allowed: allowed.map(|j| j.0.clone()).unwrap_or_default(),
        disallowed: disallowed.map(|j| j.0.clone()).unwrap_or_default(),
    }
}
