//! Every refusal of a write, in one table: its NIP-01 prefix (an [`ErrorCode`]) and the exact text
//! clients are answered with. A rule names the refusal; only [`Refusal::answer`] spells it out. A
//! text other services answer with too is spelled once in `buzz_core::refusal`.

use std::borrow::Cow;

use buzz_bus::{BusError, ErrorCode};
use buzz_core::refusal;
use buzz_store::access::WriteDenial;

/// Why a write is refused. The texts name nothing the caller cannot read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    // Admission of every client event.
    /// The event is signed by another key than the authenticated one.
    WrongAuthor,
    /// A kind this relay does not take from clients.
    KindNotAccepted(u32),
    /// The community is suspended, deleted or unknown.
    CommunityInactive,
    /// The event was accepted before and its author deleted it since (kind 5).
    DeletedByAuthor,
    /// The writer is not a member of the community.
    NotCommunityMember,
    /// The kind-9 write rule of the access module, in the channel written to.
    Denied(WriteDenial),

    // What a kind 9 names.
    /// No `h` tag.
    MissingH,
    /// `h` is not a channel id.
    BadH,
    /// More than one `e` tag marked `root`.
    TwoRoots,
    /// The thread root is not an event id.
    BadThreadRoot,
    /// The thread root is no conversation anchor of the channel.
    ThreadRootNotAnchor,

    // NIP-AR revisions (kind 45010).
    /// The envelope is malformed (`buzz_core::nipar::parse`'s reason).
    Envelope(String),
    /// `prev` is not the artifact's current revision.
    StalePrev,
    /// No artifact has this `d`: no current revision to name, so the stale-prev answer.
    UnknownArtifact,
    /// A create names an identity another artifact holds (deleted ones included).
    IdentityTaken,
    /// A created or changed root is no served conversation anchor in `h`.
    RootNotAnchor,
    /// A move's root is no conversation anchor in the destination.
    MoveRootNotAnchor,
    /// After a delete only a restore is accepted.
    Deleted,
    /// A restore of an artifact that is not deleted.
    NotDeleted,
    /// The type of an artifact never changes.
    TypeImmutable,
    /// A move names the home channel.
    MoveKeepsHome,
    /// Any other op names another channel than the home.
    UpdateLeavesHome,
    /// A delete changes the root.
    DeletionChangesRoot,

    // Kind 5 (NIP-09).
    /// A deletion names no well-formed `e` tag.
    DeletionNamesNothing,
    /// A deletion names an artifact revision (NIP-AR moderation).
    RevisionDeletion,
    /// A deletion names an event of someone else (or none the sender wrote).
    NotYourEvent,
    /// A deletion names events of more than one channel.
    DeletionSpansChannels,

    // Channel creation (kind 9007) and administration (9000, 9001, 9002, 9005, 9008).
    /// The credential lacks `channels:write` (or `messages:write` for one's own change).
    ChannelChangeScope,
    /// The credential lacks `channels:write` for a create.
    ChannelCreateScope,
    /// Neither a channel nor a community owner or admin.
    NotModerator,
    /// `p` is not a pubkey.
    BadTargetPubkey,
    /// A DM's participants never change.
    DmParticipantsFixed,
    /// A role other than member or admin is granted.
    BadChannelRole,
    /// The user added to a channel is not a community member.
    TargetNotCommunityMember,
    /// The channel owner's role is changed.
    OwnerRoleFixed,
    /// A channel owner is removed by less than a community owner or admin.
    OwnerRemoval,
    /// The user removed from a channel is not in it.
    TargetNotChannelMember,
    /// A channel is deleted by less than its owner or a community owner or admin.
    ChannelDeletion,
    /// A name of 0 or more than 256 bytes.
    BadName,
    /// A DM named open.
    DmAlwaysPrivate,
    /// A visibility other than open or private.
    BadVisibility,
    /// An `archived` other than `true` or `false`.
    BadArchived,
    /// An edit that changes nothing.
    EmptyEdit,
    /// A redaction's `e` is not an event id.
    BadRedactTarget,
    /// A redaction names no event of the channel.
    NoSuchEvent,
    /// A channel type other than stream, forum or dm.
    BadChannelType,
    /// A `ttl` that is not a positive number of seconds.
    BadTtl,
    /// A DM participant outside the community.
    DmParticipantNotMember,
    /// A DM with nobody else in it.
    DmAlone,
    /// The channel id is taken (or was).
    ChannelIdTaken,

    // Read markers, community members and tokens (requests that are not events).
    /// The channel of a read marker is missing or unreadable (`not_found`, not `restricted`).
    ChannelNotReadable,
    /// The credential lacks `messages:read`.
    ReadScope,
    /// `up_to` names no served message of the channel.
    UpToNotMessage,
    /// The credential lacks `members:write`.
    MembersScope,
    /// Neither a community owner nor an admin manages members.
    NotMemberManager,
    /// The actor's role may not grant this role to this member.
    RoleNotGrantable,
    /// The member removed is none.
    NoSuchMember,
    /// The actor's role may not remove this member.
    MemberNotRemovable,
    /// A token without scopes.
    NoScopes,
    /// A scope named twice.
    RepeatedScope,
    /// An empty channel restriction.
    NoChannelIds,
    /// More channels than a token may be restricted to (the most).
    TooManyChannelIds(usize),
    /// A channel restriction naming a channel twice or the nil id.
    BadChannelIds,
    /// A lifetime of 0 seconds.
    ExpiresInZero,
    /// A lifetime over the longest (in seconds).
    ExpiresInTooLong(u64),
    /// A lifetime beyond what the database takes.
    ExpiresInRange,
    /// A token request that is not a signed session.
    UnsignedTokenRequest,
    /// A member grants `members:write` without being a community owner or admin.
    MembersWriteGrant,
    /// The token hash is already stored.
    TokenIssued,

    // NIP-86 community management.
    /// Neither the community's owner nor an admin calls NIP-86.
    NotCommunityManager,
    /// The key is banned from the community (`banpubkey`): no membership until unbanned.
    BannedKey,
    /// `unbanpubkey` of a key that is not banned.
    NotBanned,
    /// `unblockip` of an address that is not blocked.
    NotBlocked,
    /// `unbanevent` of a banned current artifact revision (its ban retired the artifact).
    CurrentRevisionBanned,
}

const NOT_CHANNEL_MEMBER: &str = "not a member of this channel";
const STALE_PREV: &str = "prev is not the current revision";

impl Refusal {
    /// The answer: NIP-01 prefix (as its [`ErrorCode`]) and text. The one table of refusal texts.
    #[must_use]
    pub fn answer(&self) -> (ErrorCode, Cow<'static, str>) {
        use ErrorCode::{Blocked, Conflict, Invalid, NotFound, Restricted};
        let (code, text) = match self {
            Self::KindNotAccepted(kind) => {
                return (Blocked, format!("kind {kind} is not accepted by this relay").into());
            }
            Self::TooManyChannelIds(most) => return (Invalid, format!("at most {most} channel_ids").into()),
            Self::ExpiresInTooLong(most) => {
                return (Invalid, format!("expires_in must be at most {most} seconds").into());
            }
            Self::Envelope(reason) => return (Invalid, reason.clone().into()),
            Self::WrongAuthor => (Restricted, refusal::WRONG_AUTHOR),
            Self::CommunityInactive => (Restricted, "community is not active"),
            Self::DeletedByAuthor => (Blocked, "deleted by its author"),
            Self::NotCommunityMember => (Restricted, refusal::NOT_COMMUNITY_MEMBER),
            Self::Denied(d @ WriteDenial::NotFound) => (d.code(), refusal::CHANNEL_NOT_FOUND),
            Self::Denied(d @ WriteDenial::Scope) => {
                (d.code(), "token does not allow writing to this channel")
            }
            Self::Denied(d @ WriteDenial::Archived) => (d.code(), "channel is archived"),
            Self::Denied(d @ WriteDenial::NotMember) => (d.code(), NOT_CHANNEL_MEMBER),
            Self::MissingH => (Invalid, "missing h tag"),
            Self::BadH => (Invalid, "h must be a lowercase hyphenated non-nil UUID"),
            Self::TwoRoots => (Invalid, "a reply names exactly one root"),
            Self::BadThreadRoot => (Invalid, "thread root must be a 64-char lowercase hex event id"),
            Self::ThreadRootNotAnchor => {
                (Invalid, "thread root must be a conversation anchor in this channel")
            }
            Self::StalePrev | Self::UnknownArtifact => (Conflict, STALE_PREV),
            Self::IdentityTaken => (Conflict, "artifact identity is taken"),
            Self::RootNotAnchor => (Invalid, "root must be an existing, undeleted conversation anchor in h"),
            Self::MoveRootNotAnchor => {
                (Invalid, "a move's root must be absent or a conversation anchor in the destination")
            }
            Self::Deleted => (Invalid, "artifact is deleted; only restore is accepted"),
            Self::NotDeleted => (Invalid, "only a deleted artifact can be restored"),
            Self::TypeImmutable => (Invalid, "type is immutable"),
            Self::MoveKeepsHome => (Invalid, "a move changes h; use op=update to stay in the home channel"),
            Self::UpdateLeavesHome => {
                (Invalid, "h must be the artifact's home channel; use op=move to change it")
            }
            Self::DeletionChangesRoot => (Invalid, "a deletion preserves the current root"),
            Self::DeletionNamesNothing => (Invalid, "a deletion names one or more events in e tags"),
            Self::RevisionDeletion => {
                (Invalid, "artifact revisions cannot be deleted with kind 5; publish op=delete")
            }
            Self::NotYourEvent => (Restricted, "can only delete your own events"),
            Self::DeletionSpansChannels => (Invalid, "a deletion names events of one channel"),
            Self::ChannelChangeScope => (Restricted, "token does not allow this channel change"),
            Self::ChannelCreateScope => (Restricted, "token does not allow creating channels"),
            Self::NotModerator => {
                (Restricted, "only channel owners and admins, or community owners and admins, may do this")
            }
            Self::BadTargetPubkey => (Invalid, "p must be a 64-char lowercase hex pubkey"),
            Self::DmParticipantsFixed => (Invalid, "dm participants are fixed"),
            Self::BadChannelRole => (Invalid, refusal::MEMBER_OR_ADMIN),
            Self::TargetNotCommunityMember => (Invalid, "user is not a community member"),
            Self::OwnerRoleFixed => (Restricted, "the channel owner's role cannot be changed"),
            Self::OwnerRemoval => (Restricted, "only community owners and admins remove a channel owner"),
            Self::TargetNotChannelMember => (Invalid, NOT_CHANNEL_MEMBER),
            Self::ChannelDeletion => {
                (Restricted, "only the channel owner or community owners and admins delete a channel")
            }
            Self::BadName => (Invalid, "name must be 1 to 256 bytes"),
            Self::DmAlwaysPrivate => (Invalid, "a dm is always private"),
            Self::BadVisibility => (Invalid, "visibility must be open or private"),
            Self::BadArchived => (Invalid, "archived must be \"true\" or \"false\""),
            Self::EmptyEdit => (Invalid, "edit names none of name, visibility, archived"),
            Self::BadRedactTarget => (Invalid, "e must be a 64-char lowercase hex event id"),
            Self::NoSuchEvent => (Invalid, "no such event in this channel"),
            Self::BadChannelType => (Invalid, "channel_type must be stream, forum or dm"),
            Self::BadTtl => (Invalid, "ttl must be a positive number of seconds"),
            Self::DmParticipantNotMember => (Invalid, "every dm participant must be a community member"),
            Self::DmAlone => (Invalid, "a dm needs at least one other participant"),
            Self::ChannelIdTaken => (Blocked, "channel id is not available"),
            Self::ChannelNotReadable => (NotFound, refusal::CHANNEL_NOT_FOUND),
            Self::ReadScope => (Restricted, refusal::READ_SCOPE),
            Self::UpToNotMessage => (Invalid, "up_to is not a message of this channel"),
            Self::MembersScope => (Restricted, "token does not allow managing members"),
            Self::NotMemberManager => (Restricted, "only community owners and admins manage members"),
            Self::RoleNotGrantable => (Restricted, "your role cannot grant that role"),
            Self::NoSuchMember => (NotFound, "not a member"),
            Self::MemberNotRemovable => (Restricted, "your role cannot remove that member"),
            Self::NotCommunityManager => (Restricted, "only the community's owner and admins manage it"),
            Self::BannedKey => (Blocked, "that key is banned from this community"),
            Self::NotBanned => (NotFound, "that key is not banned"),
            Self::NotBlocked => (NotFound, "that address is not blocked"),
            Self::CurrentRevisionBanned => (
                Invalid,
                "a banned current revision retired its artifact; a revision naming it in prev brings it back",
            ),
            Self::NoScopes => (Invalid, "scopes must not be empty"),
            Self::RepeatedScope => (Invalid, "scopes must not repeat"),
            Self::NoChannelIds => (Invalid, "channel_ids must not be empty (omit it for no restriction)"),
            Self::BadChannelIds => (Invalid, "channel_ids must be unique non-nil UUIDs"),
            Self::ExpiresInZero => (Invalid, "expires_in must be positive"),
            Self::ExpiresInRange => (Invalid, "expires_in out of range"),
            Self::UnsignedTokenRequest => (Restricted, "tokens are issued only to signed requests"),
            Self::MembersWriteGrant => {
                (Restricted, "only community owners and admins may grant members:write")
            }
            Self::TokenIssued => (Conflict, "token already issued"),
        };
        (code, Cow::Borrowed(text))
    }

    /// The NIP-01 prefix of the answer, as its code.
    #[must_use]
    pub fn code(&self) -> ErrorCode {
        self.answer().0
    }

    /// A compare-and-swap refusal's reason in `buzz_write_cas_conflicts_total` (`stale_prev`,
    /// `unknown_artifact`, `identity_taken`): a rise means clients edit from stale state.
    #[must_use]
    pub fn cas_reason(&self) -> Option<&'static str> {
        match self {
            Self::StalePrev => Some("stale_prev"),
            Self::UnknownArtifact => Some("unknown_artifact"),
            Self::IdentityTaken => Some("identity_taken"),
            _ => None,
        }
    }
}

impl From<WriteDenial> for Refusal {
    fn from(d: WriteDenial) -> Self {
        Self::Denied(d)
    }
}

impl From<Refusal> for BusError {
    fn from(r: Refusal) -> Self {
        if let Refusal::Envelope(reason) = r {
            return BusError::invalid(reason);
        }
        let (code, text) = r.answer();
        BusError::new(code, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_denial_of_the_access_module_has_its_code() {
        // The texts themselves are pinned byte for byte by the integration tests (tests/tests).
        let code = |d: WriteDenial| BusError::from(Refusal::from(d)).code;
        assert_eq!(code(WriteDenial::Archived), ErrorCode::Blocked);
        for d in [WriteDenial::NotFound, WriteDenial::Scope, WriteDenial::NotMember] {
            assert_eq!(code(d), ErrorCode::Restricted, "{d:?}");
        }
        assert_eq!(BusError::from(Refusal::from(WriteDenial::NotFound)).message, refusal::CHANNEL_NOT_FOUND);
        assert_eq!(BusError::from(Refusal::from(WriteDenial::NotMember)).message, NOT_CHANNEL_MEMBER);
    }

    #[test]
    fn a_refusal_with_a_value_says_it() {
        assert_eq!(
            BusError::from(Refusal::KindNotAccepted(7)),
            BusError::blocked("kind 7 is not accepted by this relay")
        );
        let reason = "missing d".to_owned();
        assert_eq!(BusError::from(Refusal::Envelope(reason.clone())), BusError::invalid(reason));
        assert_eq!(
            BusError::from(Refusal::TooManyChannelIds(100)),
            BusError::invalid("at most 100 channel_ids")
        );
        assert_eq!(
            BusError::from(Refusal::ExpiresInTooLong(5)),
            BusError::invalid("expires_in must be at most 5 seconds")
        );
    }

    #[test]
    fn one_text_may_stand_under_two_prefixes_from_one_constant() {
        let denied = BusError::from(Refusal::Denied(WriteDenial::NotFound));
        let unreadable = BusError::from(Refusal::ChannelNotReadable);
        assert_eq!((denied.code, unreadable.code), (ErrorCode::Restricted, ErrorCode::NotFound));
        assert_eq!(denied.message, unreadable.message);
    }

    #[test]
    fn an_unknown_artifact_is_answered_as_a_stale_prev_but_counted_apart() {
        assert_eq!(BusError::from(Refusal::UnknownArtifact), BusError::from(Refusal::StalePrev));
        assert_eq!(BusError::from(Refusal::StalePrev), BusError::new(ErrorCode::Conflict, STALE_PREV));
        assert_eq!(Refusal::UnknownArtifact.cas_reason(), Some("unknown_artifact"));
        assert_eq!(Refusal::Deleted.cas_reason(), None);
    }
}
