//! The NIP-FI operator request bodies and query strings, validated field by field.

use buzz_core::http_json::JsonObject;
use buzz_core::{CommunityId, Pubkey};
use serde_json::Value;
use uuid::Uuid;

/// An enable or disable request, general (CAS) or legacy (`/nip-fi-upgrade`, enable-only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRequest {
    /// The client's idempotency key: a replay under it answers the stored receipt.
    pub operation_id: Uuid,
    /// The target community.
    pub community_id: CommunityId,
    /// The host the operator expects the community to have (canonical form).
    pub expected_host: String,
    /// The actor the mediating client claims to act for; recorded in the receipt.
    pub actor_pubkey: Pubkey,
    /// The owner the operator expects the community to have.
    pub expected_owner_pubkey: Pubkey,
    /// The desired `requires_nip_fi` (true = enable).
    pub desired: bool,
    /// Both `Some` for the general form, both `None` for the legacy form.
    pub expected_generation: Option<i64>,
    /// The `requires_nip_fi` the operator expects is stored now (general form only).
    pub expected_required: Option<bool>,
    /// The issuer an enable requires (bound and trusted); `None` for a disable.
    pub expected_issuer: Option<String>,
}

impl PolicyRequest {
    /// Whether this came through the legacy `/nip-fi-upgrade` form (no CAS preconditions).
    #[must_use]
    pub fn is_legacy(&self) -> bool {
        self.expected_generation.is_none()
    }
}

const GENERAL_FIELDS: [&str; 9] = [
    "operation_id",
    "community_id",
    "expected_host",
    "actor_pubkey",
    "expected_owner_pubkey",
    "requires_nip_fi",
    "expected_policy_generation",
    "expected_requires_nip_fi",
    "expected_issuer",
];
const LEGACY_FIELDS: [&str; 6] = [
    "operation_id",
    "community_id",
    "expected_host",
    "actor_pubkey",
    "expected_owner_pubkey",
    "expected_issuer",
];

/// A non-nil UUID in its canonical lowercase hyphenated form.
pub fn uuid_field(name: &str, raw: &str) -> Result<Uuid, String> {
    buzz_core::ids::parse_id(raw).ok_or_else(|| format!("{name} must be a non-nil lowercase hyphenated UUID"))
}

/// A community id: a non-nil UUID in its canonical lowercase hyphenated form.
pub fn community_field(name: &str, raw: &str) -> Result<CommunityId, String> {
    CommunityId::parse(raw).map_err(|_| format!("{name} must be a non-nil lowercase hyphenated UUID"))
}

fn key_field(req: &JsonObject, name: &str) -> Result<Pubkey, String> {
    Pubkey::parse(req.string(name)?).map_err(|_| format!("{name} must be 64 lowercase hex"))
}

/// The host exactly as the community stores it: already canonical, or refused.
pub fn canonical_host(name: &str, raw: &str) -> Result<String, String> {
    match buzz_core::host::community_host(raw) {
        Ok(h) if h == raw => Ok(h),
        Ok(h) => Err(format!("{name} must be canonical (lowercase, no trailing dot): expected {h:?}")),
        Err(e) => Err(format!("{name}: {e}")),
    }
}

fn bool_field(req: &JsonObject, name: &str) -> Result<bool, String> {
    match req.get(name) {
        Some(Value::Bool(b)) => Ok(*b),
        None => Err(format!("missing field {name}")),
        Some(_) => Err(format!("{name} must be true or false")),
    }
}

fn generation_field(req: &JsonObject, name: &str) -> Result<i64, String> {
    match req.get(name) {
        None | Some(Value::Null) => Err(format!("missing field {name}")),
        Some(v) => v
            .as_u64()
            .and_then(|g| i64::try_from(g).ok())
            .ok_or_else(|| format!("{name} must be a non-negative integer")),
    }
}

/// An issuer identifier: 1 to 2048 visible ASCII characters.
pub fn issuer_field(name: &str, raw: &str) -> Result<String, String> {
    if raw.is_empty() || raw.len() > 2048 || !raw.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("{name} must be 1 to 2048 visible ASCII characters"));
    }
    Ok(raw.to_owned())
}

fn common(req: &JsonObject) -> Result<(Uuid, CommunityId, String, Pubkey, Pubkey), String> {
    Ok((
        uuid_field("operation_id", req.string("operation_id")?)?,
        community_field("community_id", req.string("community_id")?)?,
        canonical_host("expected_host", req.string("expected_host")?)?,
        key_field(req, "actor_pubkey")?,
        key_field(req, "expected_owner_pubkey")?,
    ))
}

/// `POST /operator/communities/nip-fi-policy`: enable requires `expected_issuer`, disable must omit it.
pub fn parse_general(body: &[u8]) -> Result<PolicyRequest, String> {
    let req = JsonObject::parse(body, &GENERAL_FIELDS)?;
    let (operation_id, community_id, expected_host, actor_pubkey, expected_owner_pubkey) = common(&req)?;
    let desired = bool_field(&req, "requires_nip_fi")?;
    let expected_generation = generation_field(&req, "expected_policy_generation")?;
    let expected_required = bool_field(&req, "expected_requires_nip_fi")?;
    let expected_issuer = match (desired, req.has("expected_issuer")) {
        (true, true) => Some(issuer_field("expected_issuer", req.string("expected_issuer")?)?),
        (true, false) => return Err("enable (requires_nip_fi: true) requires expected_issuer".into()),
        (false, true) => return Err("disable (requires_nip_fi: false) must omit expected_issuer".into()),
        (false, false) => None,
    };
    Ok(PolicyRequest {
        operation_id,
        community_id,
        expected_host,
        actor_pubkey,
        expected_owner_pubkey,
        desired,
        expected_generation: Some(expected_generation),
        expected_required: Some(expected_required),
        expected_issuer,
    })
}

/// `POST /operator/communities/nip-fi-upgrade` (legacy): always an enable, no preconditions.
pub fn parse_legacy(body: &[u8]) -> Result<PolicyRequest, String> {
    let req = JsonObject::parse(body, &LEGACY_FIELDS)?;
    let (operation_id, community_id, expected_host, actor_pubkey, expected_owner_pubkey) = common(&req)?;
    let issuer = issuer_field("expected_issuer", req.string("expected_issuer")?)?;
    Ok(PolicyRequest {
        operation_id,
        community_id,
        expected_host,
        actor_pubkey,
        expected_owner_pubkey,
        desired: true,
        expected_generation: None,
        expected_required: None,
        expected_issuer: Some(issuer),
    })
}

/// The two read forms of `GET /operator/communities/nip-fi-policy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadForm {
    /// The community's current policy.
    Current {
        /// The community.
        community_id: CommunityId,
        /// The host the caller expects it to have.
        expected_host: String,
    },
    /// The receipt of one operation, by its `operation_id`.
    Operation(Uuid),
}

/// Parses the query: exactly `community_id` + `expected_host`, or exactly `operation_id`.
pub fn parse_read(query: Option<&str>) -> Result<ReadForm, String> {
    let (mut community, mut host, mut operation) = (None, None, None);
    for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match name {
            "community_id" => &mut community,
            "expected_host" => &mut host,
            "operation_id" => &mut operation,
            _ => {
                let shown: String = name.chars().take(64).collect();
                return Err(format!("unknown query parameter {}", shown.escape_default()));
            }
        };
        if slot.replace(value).is_some() {
            return Err(format!("{name} given more than once"));
        }
    }
    match (community, host, operation) {
        (Some(c), Some(h), None) => Ok(ReadForm::Current {
            community_id: community_field("community_id", c)?,
            expected_host: canonical_host("expected_host", h)?,
        }),
        (None, None, Some(o)) => Ok(ReadForm::Operation(uuid_field("operation_id", o)?)),
        (None, None, None) => Err("give community_id and expected_host, or operation_id".into()),
        _ => {
            Err("mixed query forms: give either community_id and expected_host, or operation_id alone".into())
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn body(over: &[(&str, Value)], drop: &[&str]) -> Vec<u8> {
        let mut v = serde_json::json!({
            "operation_id": "6f1c2a4e-3b5d-4c7e-9f10-2a3b4c5d6e7f",
            "community_id": "1f1c2a4e-3b5d-4c7e-9f10-2a3b4c5d6e7f",
            "expected_host": "team.example.com",
            "actor_pubkey": "a".repeat(64),
            "expected_owner_pubkey": "a".repeat(64),
            "requires_nip_fi": true,
            "expected_policy_generation": 0,
            "expected_requires_nip_fi": false,
            "expected_issuer": "https://issuer.example",
        });
        for (k, val) in over {
            v[*k] = val.clone();
        }
        for k in drop {
            v.as_object_mut().unwrap().remove(*k);
        }
        v.to_string().into_bytes()
    }

    #[test]
    fn general_requests_are_validated_field_by_field() {
        assert!(parse_general(&body(&[], &[])).is_ok());
        let err = |over: &[(&str, Value)], drop: &[&str]| parse_general(&body(over, drop)).unwrap_err();
        assert!(err(&[("extra", Value::Bool(true))], &[]).contains("unknown field"));
        assert!(
            err(&[("operation_id", "00000000-0000-0000-0000-000000000000".into())], &[]).contains("non-nil")
        );
        assert!(err(&[("actor_pubkey", "A".repeat(64).into())], &[]).contains("lowercase hex"));
        assert!(err(&[("expected_policy_generation", (-1).into())], &[]).contains("non-negative"));
        assert!(err(&[], &["expected_policy_generation"]).contains("missing field"));
        assert!(err(&[], &["expected_requires_nip_fi"]).contains("missing field"));
        assert!(err(&[], &["expected_issuer"]).contains("requires expected_issuer"));
        assert!(err(&[("requires_nip_fi", false.into())], &[]).contains("must omit expected_issuer"));
        assert!(parse_general(&body(&[("requires_nip_fi", false.into())], &["expected_issuer"])).is_ok());
        assert!(err(&[("expected_host", "Team.Example.com".into())], &[]).contains("canonical"));
    }

    #[test]
    fn read_forms_are_exclusive() {
        let id = "6f1c2a4e-3b5d-4c7e-9f10-2a3b4c5d6e7f";
        assert!(matches!(parse_read(Some(&format!("operation_id={id}"))), Ok(ReadForm::Operation(_))));
        let cur = format!("community_id={id}&expected_host=a.example");
        assert!(matches!(parse_read(Some(&cur)), Ok(ReadForm::Current { .. })));
        assert!(parse_read(Some(&format!("{cur}&operation_id={id}"))).unwrap_err().contains("mixed"));
        assert!(parse_read(Some(&format!("community_id={id}"))).unwrap_err().contains("mixed"));
        assert!(parse_read(Some("x=1")).unwrap_err().contains("unknown"));
        assert!(parse_read(None).is_err());
    }
}
