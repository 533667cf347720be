//! NIP-86 relay management: a request `{"method", "params"}` parsed once into a typed [`Call`],
//! and the methods this relay serves ([`SUPPORTED`]). What each call does is the write-service's
//! (`write-service/src/manage.rs`); who may call is decided there too.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{EventId, Pubkey};

/// The `Content-Type` of a NIP-86 request.
pub const CONTENT_TYPE: &str = "application/nostr+json+rpc";

/// Longest `reason` kept with a ban or allow (characters).
pub const MAX_REASON_CHARS: usize = 1024;

/// The methods `supportedmethods` lists, in the NIP's order. Left out: `grantadmin` and
/// `revokeadmin` (they grant single methods; community roles grant all of them, so they do not fit),
/// (docs/design.md, "NIP-86 community management").
pub const SUPPORTED: [&str; 22] = [
    "supportedmethods",
    "banpubkey",
    "unbanpubkey",
    "listbannedpubkeys",
    "allowpubkey",
    "unallowpubkey",
    "listallowedpubkeys",
    "listeventsneedingmoderation",
    "allowevent",
    "banevent",
    "unbanevent",
    "listbannedevents",
    "changerelayname",
    "changerelaydescription",
    "changerelayicon",
    "allowkind",
    "disallowkind",
    "listallowedkinds",
    "listdisallowedkinds",
    "blockip",
    "unblockip",
    "listblockedips",
];

/// A community's kind rules (`allowkind`, `disallowkind`), checked when a gateway admits an
/// event: a disallowed kind never, and when the allowlist is not empty only the kinds on it. An
/// empty allowlist is no allowlist (every kind the relay takes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindRules {
    /// The allowlist (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<u32>,
    /// Kinds refused whatever the allowlist says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disallowed: Vec<u32>,
}

impl KindRules {
    /// No rule: every kind the relay takes.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.allowed.is_empty() && self.disallowed.is_empty()
    }

    /// Whether an event of `kind` may be written in the community.
    #[must_use]
    pub fn admits(&self, kind: u32) -> bool {
        !self.disallowed.contains(&kind) && (self.allowed.is_empty() || self.allowed.contains(&kind))
    }
}

/// One NIP-86 call with its parameters parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Call {
    /// `supportedmethods`.
    SupportedMethods,
    /// `banpubkey [pubkey, reason?]`: a community ban.
    BanPubkey {
        /// The key banned.
        pubkey: Pubkey,
        /// Why, as the caller said.
        reason: Option<String>,
    },
    /// `unbanpubkey [pubkey, reason?]`: lifts the ban (membership is not given back).
    UnbanPubkey {
        /// The key.
        pubkey: Pubkey,
        /// Why, as the caller said.
        reason: Option<String>,
    },
    /// `listbannedpubkeys []`.
    ListBannedPubkeys,
    /// `allowpubkey [pubkey, reason?]`: community membership (role member unless it has one).
    AllowPubkey {
        /// The key.
        pubkey: Pubkey,
        /// Why, as the caller said.
        reason: Option<String>,
    },
    /// `unallowpubkey [pubkey, reason?]`: removes the membership.
    UnallowPubkey {
        /// The key.
        pubkey: Pubkey,
        /// Why, as the caller said.
        reason: Option<String>,
    },
    /// `listallowedpubkeys []`: the community's members.
    ListAllowedPubkeys,
    /// `listeventsneedingmoderation []`: always empty (NIP-56 reports are not accepted).
    ListEventsNeedingModeration,
    /// `banevent [id, reason?]`: the event is redacted under the kind-9005 rules.
    BanEvent {
        /// The event.
        id: EventId,
        /// Why, as the caller said.
        reason: Option<String>,
    },
    /// `unbanevent [id, reason?]`: a `banevent` is undone (the redaction is lifted).
    UnbanEvent {
        /// The event.
        id: EventId,
        /// Why, as the caller said.
        reason: Option<String>,
    },
    /// `allowevent [id, reason?]`: as `unbanevent` (nothing waits for moderation to allow).
    AllowEvent {
        /// The event.
        id: EventId,
        /// Why, as the caller said.
        reason: Option<String>,
    },
    /// `listbannedevents []`: the events banned with `banevent`, in channels the caller reads.
    ListBannedEvents,
    /// `allowkind [kind]`: on the allowlist, off the disallowed list.
    AllowKind {
        /// The kind.
        kind: u32,
    },
    /// `disallowkind [kind]`: on the disallowed list, off the allowlist.
    DisallowKind {
        /// The kind.
        kind: u32,
    },
    /// `listallowedkinds []`.
    ListAllowedKinds,
    /// `listdisallowedkinds []`.
    ListDisallowedKinds,
    /// `blockip [ip, reason?]`: the community's host refuses requests from the address.
    BlockIp {
        /// The address (IPv4-mapped IPv6 addresses as IPv4).
        ip: std::net::IpAddr,
        /// Why, as the caller said.
        reason: Option<String>,
    },
    /// `unblockip [ip, reason?]`.
    UnblockIp {
        /// The address.
        ip: std::net::IpAddr,
        /// Why, as the caller said.
        reason: Option<String>,
    },
    /// `listblockedips []`.
    ListBlockedIps,
    /// `changerelayname [name]`: the community's NIP-11 `name`.
    ChangeRelayName {
        /// 1 to 64 characters, no control characters.
        name: String,
    },
    /// `changerelaydescription [description]`.
    ChangeRelayDescription {
        /// 1 to 1024 characters, no control characters.
        description: String,
    },
    /// `changerelayicon [url]`.
    ChangeRelayIcon {
        /// An http(s) URL of at most 2048 characters.
        icon: String,
    },
}

impl Call {
    /// The NIP-86 method name.
    #[must_use]
    pub fn method(&self) -> &'static str {
        match self {
            Self::SupportedMethods => "supportedmethods",
            Self::BanPubkey { .. } => "banpubkey",
            Self::UnbanPubkey { .. } => "unbanpubkey",
            Self::ListBannedPubkeys => "listbannedpubkeys",
            Self::AllowPubkey { .. } => "allowpubkey",
            Self::UnallowPubkey { .. } => "unallowpubkey",
            Self::ListAllowedPubkeys => "listallowedpubkeys",
            Self::ListEventsNeedingModeration => "listeventsneedingmoderation",
            Self::BanEvent { .. } => "banevent",
            Self::UnbanEvent { .. } => "unbanevent",
            Self::AllowEvent { .. } => "allowevent",
            Self::ListBannedEvents => "listbannedevents",
            Self::AllowKind { .. } => "allowkind",
            Self::DisallowKind { .. } => "disallowkind",
            Self::ListAllowedKinds => "listallowedkinds",
            Self::ListDisallowedKinds => "listdisallowedkinds",
            Self::BlockIp { .. } => "blockip",
            Self::UnblockIp { .. } => "unblockip",
            Self::ListBlockedIps => "listblockedips",
            Self::ChangeRelayName { .. } => "changerelayname",
            Self::ChangeRelayDescription { .. } => "changerelaydescription",
            Self::ChangeRelayIcon { .. } => "changerelayicon",
        }
    }

    /// True for the methods that change something (and are audited).
    #[must_use]
    pub fn changes(&self) -> bool {
        !matches!(
            self,
            Self::SupportedMethods
                | Self::ListBannedPubkeys
                | Self::ListAllowedPubkeys
                | Self::ListEventsNeedingModeration
                | Self::ListBannedEvents
                | Self::ListAllowedKinds
                | Self::ListDisallowedKinds
                | Self::ListBlockedIps
        )
    }
}

/// Parses a request body `{"method": "...", "params": [...]}`. The error is the text of the
/// JSON-RPC `error` field.
pub fn parse(body: &[u8]) -> Result<Call, String> {
    let v: Value = serde_json::from_slice(body).map_err(|_| "the body must be a JSON object".to_owned())?;
    let obj = v.as_object().ok_or("the body must be a JSON object")?;
    if let Some(extra) = obj.keys().find(|k| *k != "method" && *k != "params") {
        let shown: String = extra.chars().take(64).collect();
        return Err(format!("unknown field {}", shown.escape_default()));
    }
    let method = obj.get("method").and_then(Value::as_str).ok_or("method must be a string")?;
    let params = match obj.get("params") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => a.as_slice(),
        Some(_) => return Err("params must be an array".into()),
    };
    call(method, params)
}

/// The call of `method` with `params`.
pub fn call(method: &str, params: &[Value]) -> Result<Call, String> {
    let (min, max) = match method {
        "supportedmethods"
        | "listbannedpubkeys"
        | "listallowedpubkeys"
        | "listeventsneedingmoderation"
        | "listbannedevents"
        | "listallowedkinds"
        | "listdisallowedkinds"
        | "listblockedips" => (0, 0),
        "blockip" | "unblockip" => (1, 2),
        "allowkind" | "disallowkind" => (1, 1),
        "banpubkey" | "unbanpubkey" | "allowpubkey" | "unallowpubkey" | "banevent" | "unbanevent"
        | "allowevent" => (1, 2),
        "changerelayname" | "changerelaydescription" | "changerelayicon" => (1, 1),
        other => {
            let shown: String = other.chars().take(64).collect();
            return Err(format!("unsupported method {}", shown.escape_default()));
        }
    };
    if params.len() < min || params.len() > max {
        return Err(format!("{method} takes {min} to {max} params"));
    }
    let text = |i: usize, what: &str| -> Result<&str, String> {
        params[i].as_str().ok_or_else(|| format!("{what} must be a string"))
    };
    let pubkey =
        || Pubkey::parse(text(0, "pubkey")?).map_err(|_| "pubkey must be 64 lowercase hex".to_owned());
    let event_id = || {
        EventId::parse(text(0, "id")?).map_err(|_| "id must be a 64-char lowercase hex event id".to_owned())
    };
    let kind = || {
        params[0]
            .as_u64()
            .and_then(|k| u32::try_from(k).ok())
            .ok_or_else(|| "kind must be an integer from 0 to 4294967295".to_owned())
    };
    let ip = || {
        text(0, "ip")?
            .parse::<std::net::IpAddr>()
            .map(|a| a.to_canonical())
            .map_err(|_| "ip must be an IPv4 or IPv6 address".to_owned())
    };
    let reason = || -> Result<Option<String>, String> {
        match params.get(1) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => Ok(Some(bounded(text(1, "reason")?, "reason", MAX_REASON_CHARS, true)?)),
        }
    };
    Ok(match method {
        "supportedmethods" => Call::SupportedMethods,
        "listbannedpubkeys" => Call::ListBannedPubkeys,
        "listallowedpubkeys" => Call::ListAllowedPubkeys,
        "listeventsneedingmoderation" => Call::ListEventsNeedingModeration,
        "listbannedevents" => Call::ListBannedEvents,
        "listallowedkinds" => Call::ListAllowedKinds,
        "listdisallowedkinds" => Call::ListDisallowedKinds,
        "listblockedips" => Call::ListBlockedIps,
        "blockip" => Call::BlockIp { ip: ip()?, reason: reason()? },
        "unblockip" => Call::UnblockIp { ip: ip()?, reason: reason()? },
        "allowkind" => Call::AllowKind { kind: kind()? },
        "disallowkind" => Call::DisallowKind { kind: kind()? },
        "banevent" => Call::BanEvent { id: event_id()?, reason: reason()? },
        "unbanevent" => Call::UnbanEvent { id: event_id()?, reason: reason()? },
        "allowevent" => Call::AllowEvent { id: event_id()?, reason: reason()? },
        "banpubkey" => Call::BanPubkey { pubkey: pubkey()?, reason: reason()? },
        "unbanpubkey" => Call::UnbanPubkey { pubkey: pubkey()?, reason: reason()? },
        "allowpubkey" => Call::AllowPubkey { pubkey: pubkey()?, reason: reason()? },
        "unallowpubkey" => Call::UnallowPubkey { pubkey: pubkey()?, reason: reason()? },
        "changerelayname" => Call::ChangeRelayName { name: bounded(text(0, "name")?, "name", 64, false)? },
        "changerelaydescription" => Call::ChangeRelayDescription {
            description: bounded(text(0, "description")?, "description", 1024, false)?,
        },
        _ => {
            let icon = bounded(text(0, "icon")?, "icon", 2048, false)?;
            if !(icon.starts_with("https://") || icon.starts_with("http://")) {
                return Err("icon must be an http:// or https:// URL".into());
            }
            Call::ChangeRelayIcon { icon }
        }
    })
}

/// A text of 1 to `max` characters without control characters (`empty_ok`: 0 too), as the
/// operator API validates the same profile fields.
fn bounded(text: &str, field: &str, max: usize, empty_ok: bool) -> Result<String, String> {
    let chars = text.chars().count();
    if (chars == 0 && !empty_ok) || chars > max || text.chars().any(char::is_control) {
        return Err(format!("{field} must have 1 to {max} characters and no control characters"));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests;
