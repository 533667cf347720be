//! The stored domain values, as enums. Each is a `text` column with a `CHECK` listing exactly
//! these values (store/migrations/0001_baseline.sql); sqlx encodes and decodes them as that text
//! (feature `sqlx`), so a row with any other value fails to decode instead of reaching a decision
//! as an unchecked string. The same lowercase names travel on the bus (serde).

use serde::{Deserialize, Serialize};

/// A community or channel role (`community_members.role`, `channel_members.role`). Ordered by
/// power: `Member < Admin < Owner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(type_name = "text", rename_all = "lowercase"))]
pub enum Role {
    /// An ordinary member.
    Member,
    /// Manages members (and, in a channel, moderates it).
    Admin,
    /// Set when a community is provisioned or a channel is created; never granted afterwards.
    Owner,
}

impl Role {
    /// The stored text.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::Admin => "admin",
            Self::Owner => "owner",
        }
    }

    /// The role named by `s` (a stored value or a tag value); `None` for anything else.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Member, Self::Admin, Self::Owner].into_iter().find(|r| r.as_str() == s)
    }

    /// Owner or admin: may moderate.
    #[must_use]
    pub fn is_admin(self) -> bool {
        self >= Self::Admin
    }
}

/// Who may read a channel without joining it (`channels.visibility`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(type_name = "text", rename_all = "lowercase"))]
pub enum Visibility {
    /// Every community member reads it and may post without joining.
    Open,
    /// Its members only.
    Private,
}

impl Visibility {
    /// The stored (and tag) text.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Private => "private",
        }
    }

    /// The visibility named by `s`; `None` for anything else.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Open, Self::Private].into_iter().find(|v| v.as_str() == s)
    }
}

/// What a channel is for (`channels.channel_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(type_name = "text", rename_all = "lowercase"))]
pub enum ChannelType {
    /// A chat stream.
    Stream,
    /// Threads first.
    Forum,
    /// A direct conversation: always private, its participants are peers.
    Dm,
}

impl ChannelType {
    /// The stored (and tag) text.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stream => "stream",
            Self::Forum => "forum",
            Self::Dm => "dm",
        }
    }

    /// The channel type named by `s`; `None` for anything else.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Stream, Self::Forum, Self::Dm].into_iter().find(|t| t.as_str() == s)
    }
}

/// Where a community is in its life (`communities.lifecycle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(type_name = "text", rename_all = "lowercase"))]
pub enum Lifecycle {
    /// Served: leases are granted, writes and reads run.
    Active,
    /// Kept but read-only (the schema allows it; no operator route sets it yet).
    Archived,
    /// Its deletion has been recorded: no lease, no write; the rows go next.
    Deleting,
}

impl Lifecycle {
    /// The stored text.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Archived => "archived",
            Self::Deleting => "deleting",
        }
    }

    /// The lifecycle named by `s`; `None` for anything else.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Active, Self::Archived, Self::Deleting].into_iter().find(|l| l.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_round_trips_through_its_stored_text_and_nothing_else_parses() {
        for r in [Role::Member, Role::Admin, Role::Owner] {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        for v in [Visibility::Open, Visibility::Private] {
            assert_eq!(Visibility::parse(v.as_str()), Some(v));
        }
        for t in [ChannelType::Stream, ChannelType::Forum, ChannelType::Dm] {
            assert_eq!(ChannelType::parse(t.as_str()), Some(t));
        }
        for l in [Lifecycle::Active, Lifecycle::Archived, Lifecycle::Deleting] {
            assert_eq!(Lifecycle::parse(l.as_str()), Some(l));
            assert_eq!(serde_json::to_value(l).unwrap(), serde_json::json!(l.as_str()));
        }
        assert_eq!(serde_json::to_value(Role::Admin).unwrap(), serde_json::json!("admin"));
        assert_eq!(Role::parse("Owner"), None);
        assert_eq!(Visibility::parse("public"), None);
        assert_eq!(ChannelType::parse(""), None);
    }

    #[test]
    fn roles_are_ordered_by_power() {
        assert!(Role::Member < Role::Admin && Role::Admin < Role::Owner);
        assert!(Role::Owner.is_admin() && Role::Admin.is_admin() && !Role::Member.is_admin());
    }
}
