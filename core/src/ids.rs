//! The one canonical text form of a UUID on this relay: 36 characters, lowercase, hyphenated
//! (`h` and `d` tags, channel ids in URLs and tokens, artifact query `#d` values). Braces,
//! `urn:uuid:`, the simple (unhyphenated) form and uppercase are refused rather than normalised,
//! so that one channel or artifact never has two spellings.
//!
//! The relay's identities as types, parsed once where they enter (the message parser, a bus
//! payload, a URL, a database row) and carried typed to the SQL bind: [`EventId`] and [`Pubkey`]
//! (64 lowercase hex) and a token's [`TokenHash`], [`CommunityId`] and [`ChannelId`] (canonical UUIDs). Only their parsers
//! check the text form.

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};
use uuid::Uuid;

use crate::hex::is_lower_hex;

/// Why a text is not the identity it should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} must be {form}")]
pub struct IdError {
    /// What the text should have named (`event id`, `pubkey`, `community id`, `channel id`).
    pub what: &'static str,
    /// Its one accepted form.
    pub form: &'static str,
}

/// A 64-lowercase-hex identity: the text is kept (it is what the wire, the database and the
/// canonical form carry), checked once by the constructor.
macro_rules! hex_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        #[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
        pub struct $name(String);

        impl $name {
            const ERROR: IdError = IdError { what: $what, form: "64 lowercase hex" };

            /// `s` when it is exactly 64 lowercase hex characters.
            pub fn parse(s: &str) -> Result<Self, IdError> {
                if is_lower_hex(s, 64) { Ok(Self(s.to_owned())) } else { Err(Self::ERROR) }
            }
            /// The text form (64 lowercase hex).
            #[must_use]
            pub fn as_str(&self) -> &str {
                &self.0
            }
            /// The 32 bytes it encodes.
            #[must_use]
            pub fn to_bytes(&self) -> [u8; 32] {
                let mut out = [0u8; 32];
                // Checked by the constructor: 64 lowercase hex always decodes.
                let _ = hex::decode_to_slice(&self.0, &mut out);
                out
            }
            /// The identity of these 32 bytes.
            #[must_use]
            pub fn from_bytes(bytes: &[u8; 32]) -> Self {
                Self(hex::encode(bytes))
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                if is_lower_hex(&s, 64) { Ok(Self(s)) } else { Err(Self::ERROR) }
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdError;
            fn try_from(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        /// Read as its text where text is wanted (JSON, logs, clients); functions of the
        /// services take the type itself.
        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.0 == *other
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Self::try_from(String::deserialize(d)?).map_err(serde::de::Error::custom)
            }
        }
    };
}

hex_id!(
    /// An event's id: the sha256 of its canonical form.
    EventId,
    "event id"
);
hex_id!(
    /// A BIP-340 x-only public key: an author, a member, an owner, an operator.
    Pubkey,
    "pubkey"
);
hex_id!(
    /// The sha256 of a bearer token: the only form of a token that is sent on the bus or stored.
    TokenHash,
    "token hash"
);

/// A UUID identity; displayed in its one canonical text form.
macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        #[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
        pub struct $name(pub Uuid);

        impl $name {
            /// `s` when it is a canonical, non-nil UUID ([`parse_id`]).
            pub fn parse(s: &str) -> Result<Self, IdError> {
                parse_id(s).map(Self).ok_or(IdError { what: $what, form: "a lowercase hyphenated UUID" })
            }
            /// The UUID.
            #[must_use]
            pub fn uuid(self) -> Uuid {
                self.0
            }
            /// A new random (version 4) id.
            #[must_use]
            pub fn new_v4() -> Self {
                Self(Uuid::new_v4())
            }
            /// The id of this 128-bit value (fixtures and tests).
            #[must_use]
            pub const fn from_u128(v: u128) -> Self {
                Self(Uuid::from_u128(v))
            }
            /// The nil id: names nothing; a placeholder where a test needs some id.
            #[must_use]
            pub const fn nil() -> Self {
                Self(Uuid::nil())
            }
            /// It is the nil id.
            #[must_use]
            pub const fn is_nil(self) -> bool {
                self.0.is_nil()
            }
        }

        impl From<Uuid> for $name {
            fn from(u: Uuid) -> Self {
                Self(u)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Uuid {
                id.0
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }
    };
}

uuid_id!(
    /// A community's id.
    CommunityId,
    "community id"
);
uuid_id!(
    /// A channel's id (an `h` tag value).
    ChannelId,
    "channel id"
);

/// `s` as a UUID when it is in the canonical form (the nil UUID included).
#[must_use]
pub fn parse_uuid(s: &str) -> Option<Uuid> {
    let uuid = Uuid::try_parse(s).ok()?;
    let mut buf = Uuid::encode_buffer();
    (*uuid.hyphenated().encode_lower(&mut buf) == *s).then_some(uuid)
}

/// [`parse_uuid`] that also refuses the nil UUID, for ids that name something (channels,
/// artifacts).
#[must_use]
pub fn parse_id(s: &str) -> Option<Uuid> {
    parse_uuid(s).filter(|u| !u.is_nil())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "6f1c2a4e-8a51-4b0e-9d3f-0c1b2a3d4e5f";

    const HEX: &str = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";

    #[test]
    fn hex_ids_accept_only_64_lowercase_hex_and_keep_the_text() {
        let id = EventId::parse(HEX).unwrap();
        assert_eq!(id.as_str(), HEX);
        assert_eq!(id.to_string(), HEX);
        assert_eq!(EventId::from_bytes(&id.to_bytes()), id);
        for bad in [HEX.to_uppercase(), HEX[1..].to_owned(), format!("{HEX}0"), format!("{}g", &HEX[1..])] {
            assert_eq!(Pubkey::parse(&bad).unwrap_err().to_string(), "pubkey must be 64 lowercase hex");
            assert!(EventId::try_from(bad.clone()).is_err(), "{bad}");
            assert!(serde_json::from_value::<EventId>(serde_json::json!(bad)).is_err());
        }
        let wire: Pubkey = serde_json::from_value(serde_json::json!(HEX)).unwrap();
        assert_eq!(serde_json::to_value(&wire).unwrap(), serde_json::json!(HEX));
        let set: std::collections::HashSet<Pubkey> = [wire].into();
        assert!(set.contains(HEX), "looked up by its text");
    }

    #[test]
    fn uuid_ids_display_canonically_and_refuse_other_spellings() {
        let c = ChannelId::parse(ID).unwrap();
        assert_eq!(c.to_string(), ID);
        assert_eq!(serde_json::to_value(c).unwrap(), serde_json::json!(ID));
        assert_eq!(serde_json::from_value::<ChannelId>(serde_json::json!(ID)).unwrap(), c);
        for bad in [ID.to_uppercase(), ID.replace('-', ""), format!("{{{ID}}}"), String::new()] {
            assert_eq!(
                CommunityId::parse(&bad).unwrap_err().to_string(),
                "community id must be a lowercase hyphenated UUID"
            );
        }
        assert!(ChannelId::parse("00000000-0000-0000-0000-000000000000").is_err());
        assert!(ChannelId::nil().is_nil() && !c.is_nil());
        assert_eq!(CommunityId::from_u128(7).uuid(), Uuid::from_u128(7));
    }

    #[test]
    fn only_the_lowercase_hyphenated_form_is_accepted() {
        assert_eq!(parse_uuid(ID).map(|u| u.to_string()).as_deref(), Some(ID));
        for other in [
            ID.to_uppercase(),
            ID.replace('-', ""),
            format!("{{{ID}}}"),
            format!("urn:uuid:{ID}"),
            format!(" {ID}"),
            String::new(),
        ] {
            assert_eq!(parse_uuid(&other), None, "{other}");
        }
    }

    #[test]
    fn the_nil_uuid_parses_but_names_nothing() {
        let nil = "00000000-0000-0000-0000-000000000000";
        assert_eq!(parse_uuid(nil), Some(Uuid::nil()));
        assert_eq!(parse_id(nil), None);
        assert!(parse_id(ID).is_some());
    }
}
