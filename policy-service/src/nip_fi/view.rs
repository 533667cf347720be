//! What the NIP-FI operator routes answer: receipts with their derived state, and current-state
//! reads with the exact expected precondition fields.

use buzz_core::Lifecycle;
use buzz_fi::Mode;
use serde_json::{json, Value};

use crate::nip_fi::store::{Current, Receipt};

/// A receipt's state: `applied`, `pending`, `superseded` or `unavailable` (never `active`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// A disable whose policy is still current.
    Applied,
    /// An enable whose policy is current and whose issuer trust is available.
    Pending,
    /// The policy has changed since (another generation or flag).
    Superseded,
    /// The community is gone, not active, on another host, or an enable's trust is unavailable.
    Unavailable,
}

impl State {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Pending => "pending",
            Self::Superseded => "superseded",
            Self::Unavailable => "unavailable",
        }
    }
}

/// Derives the state from the current target (`None` = deleted) and, for an enable, whether the
/// required issuer trust (registry keys and the exact binding) is available now.
#[must_use]
pub fn state(r: &Receipt, current: Option<&Current>, trust_available: bool) -> State {
    let Some(cur) = current else { return State::Unavailable };
    if cur.lifecycle != Lifecycle::Active || cur.host != r.expected_host {
        return State::Unavailable;
    }
    if cur.policy_generation != r.accepted_policy_generation
        || cur.requires_nip_fi != r.desired_requires_nip_fi
    {
        return State::Superseded;
    }
    match (r.desired_requires_nip_fi, trust_available) {
        (false, _) => State::Applied,
        (true, true) => State::Pending,
        (true, false) => State::Unavailable,
    }
}

/// `{"receipt": {...}, "mode", "effective_required"}`; current fields are null for a deleted target.
#[must_use]
pub fn receipt_body(r: &Receipt, current: Option<&Current>, trust_available: bool, mode: Mode) -> Value {
    let st = state(r, current, trust_available);
    let pending_reasons: Vec<&str> =
        if st == State::Pending { vec!["connection_closure_unverified"] } else { Vec::new() };
    json!({
        "receipt": {
            "operation_id": r.operation_id,
            "action": if r.desired_requires_nip_fi { "enable" } else { "disable" },
            "state": st.as_str(),
            "request_form": if r.is_legacy() { "legacy" } else { "general" },
            "accepted_policy_generation": r.accepted_policy_generation,
            "accepted_at": r.accepted_at,
            "community_id": r.community_id,
            "expected_host": r.expected_host,
            "actor_pubkey": r.actor_pubkey,
            "expected_owner_pubkey": r.expected_owner_pubkey,
            "expected_issuer": r.expected_issuer,
            "requires_nip_fi": r.desired_requires_nip_fi,
            "expected_policy_generation": r.expected_policy_generation,
            "expected_requires_nip_fi": r.expected_requires_nip_fi,
            "current_policy_generation": current.map(|c| c.policy_generation),
            "current_requires_nip_fi": current.map(|c| c.requires_nip_fi),
            "pending_reasons": pending_reasons,
        },
        "mode": mode.as_str(),
        "effective_required": current.map(|c| mode.effective_required(c.requires_nip_fi)),
    })
}

/// The current-state read: the stored policy plus the exact fields a next request must carry.
#[must_use]
pub fn current_body(cur: &Current, bindings: &[String], mode: Mode, upgrades_enabled: bool) -> Value {
    json!({
        "community_id": cur.community_id,
        "host": cur.host,
        "lifecycle": cur.lifecycle,
        "owner_pubkey": cur.owner_pubkey,
        "requires_nip_fi": cur.requires_nip_fi,
        "policy_generation": cur.policy_generation,
        "bindings": bindings,
        "expected_host": cur.host,
        "expected_owner_pubkey": cur.owner_pubkey,
        "expected_policy_generation": cur.policy_generation,
        "expected_requires_nip_fi": cur.requires_nip_fi,
        "mode": mode.as_str(),
        "effective_required": mode.effective_required(cur.requires_nip_fi),
        "upgrades_enabled": upgrades_enabled,
    })
}
