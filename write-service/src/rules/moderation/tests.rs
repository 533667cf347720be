//! Every refusal of channel administration ([`super::decide`]), without a database.

use buzz_bus::{Actor, Scope};
use buzz_core::{ChannelId, Keys};

use super::*;

const ID: ChannelId = ChannelId::from_u128(5);

fn channel(channel_type: ChannelType) -> Channel {
    Channel { channel_type, ..crate::rules::open_channel(ID) }
}

const MEMBER: Standing = Standing {
    community_member: true,
    community_admin: false,
    channel_member: true,
    channel_admin: false,
    banned: false,
};
const ADMIN: Standing = Standing { channel_admin: true, ..MEMBER };

fn view(channel_type: ChannelType, standing: Standing) -> ModerationView<'static> {
    ModerationView {
        channel: Some(channel(channel_type)),
        standing,
        target_community_role: Some(Role::Member),
        ..ModerationView::default()
    }
}

fn change(keys: &Keys, kind: u32, tags: &[&[&str]]) -> Event {
    let mut all = vec![vec!["h".to_owned(), ID.to_string()]];
    all.extend(tags.iter().map(|t| t.iter().map(|s| (*s).to_owned()).collect()));
    keys.sign_new(kind, all, "")
}

fn refusal(event: &Event, actor: &Actor, view: ModerationView<'_>) -> Option<Refusal> {
    decide(event, actor, ID, view).err()
}

#[test]
fn a_channel_the_sender_cannot_see_or_whose_credential_excludes_it_is_denied_first() {
    let keys = Keys::generate();
    let actor = Actor::session(keys.pubkey());
    let edit = change(&keys, EDIT_CHANNEL, &[&["name", "x"]]);
    let none = ModerationView { channel: None, standing: ADMIN, ..ModerationView::default() };
    assert_eq!(refusal(&edit, &actor, none), Some(Refusal::Denied(WriteDenial::NotFound)));
    let elsewhere = Actor { channel_ids: Some(vec![ChannelId::from_u128(6)]), ..actor.clone() };
    assert_eq!(
        refusal(&edit, &elsewhere, view(ChannelType::Stream, ADMIN)),
        Some(Refusal::Denied(WriteDenial::Scope))
    );
}

#[test]
fn puts_need_a_moderator_a_member_target_and_never_touch_the_owner() {
    let keys = Keys::generate();
    let actor = Actor::session(keys.pubkey());
    let target = "b".repeat(64);
    let put = change(&keys, PUT_USER, &[&["p", &target]]);
    assert_eq!(refusal(&put, &actor, view(ChannelType::Dm, ADMIN)), Some(Refusal::DmParticipantsFixed));
    let read_only = Actor { scopes: vec![Scope::MessagesRead], ..actor.clone() };
    assert_eq!(
        refusal(&put, &read_only, view(ChannelType::Stream, ADMIN)),
        Some(Refusal::ChannelChangeScope)
    );
    assert_eq!(refusal(&put, &actor, view(ChannelType::Stream, MEMBER)), Some(Refusal::NotModerator));
    let bad = change(&keys, PUT_USER, &[&["p", "B"]]);
    assert_eq!(refusal(&bad, &actor, view(ChannelType::Stream, ADMIN)), Some(Refusal::BadTargetPubkey));
    let owner = change(&keys, PUT_USER, &[&["p", &target, "owner"]]);
    assert_eq!(refusal(&owner, &actor, view(ChannelType::Stream, ADMIN)), Some(Refusal::BadChannelRole));
    let outsider = ModerationView { target_community_role: None, ..view(ChannelType::Stream, ADMIN) };
    assert_eq!(refusal(&put, &actor, outsider), Some(Refusal::TargetNotCommunityMember));
    let channel_owner =
        ModerationView { target_channel_role: Some(Role::Owner), ..view(ChannelType::Stream, ADMIN) };
    assert_eq!(refusal(&put, &actor, channel_owner), Some(Refusal::OwnerRoleFixed));
    let (_, put) = decide(&put, &actor, ID, view(ChannelType::Stream, ADMIN)).unwrap();
    assert_eq!(
        put,
        Change::PutUser { target: buzz_core::Pubkey::parse(&target).unwrap(), role: Role::Member }
    );
}

#[test]
fn anyone_leaves_but_only_community_admins_remove_a_channel_owner() {
    let keys = Keys::generate();
    let actor = Actor::session(keys.pubkey());
    let me = keys.public_hex();
    let leave = change(&keys, REMOVE_USER, &[&["p", &me]]);
    assert!(decide(&leave, &actor, ID, view(ChannelType::Stream, MEMBER)).is_ok());
    assert_eq!(refusal(&leave, &actor, view(ChannelType::Dm, MEMBER)), Some(Refusal::DmParticipantsFixed));
    let target = "b".repeat(64);
    let remove = change(&keys, REMOVE_USER, &[&["p", &target]]);
    assert_eq!(refusal(&remove, &actor, view(ChannelType::Stream, MEMBER)), Some(Refusal::NotModerator));
    let channel_owner =
        ModerationView { target_channel_role: Some(Role::Owner), ..view(ChannelType::Stream, ADMIN) };
    assert_eq!(refusal(&remove, &actor, channel_owner.clone()), Some(Refusal::OwnerRemoval));
    let community_admin = Standing { community_admin: true, ..ADMIN };
    let by_admin = ModerationView { standing: community_admin, ..channel_owner };
    assert!(decide(&remove, &actor, ID, by_admin).is_ok());
}

#[test]
fn an_edit_changes_something_valid() {
    let keys = Keys::generate();
    let actor = Actor::session(keys.pubkey());
    let cases: [(&[&[&str]], ChannelType, Refusal); 5] = [
        (&[&["name", "  "]], ChannelType::Stream, Refusal::BadName),
        (&[&["visibility", "open"]], ChannelType::Dm, Refusal::DmAlwaysPrivate),
        (&[&["visibility", "public"]], ChannelType::Stream, Refusal::BadVisibility),
        (&[&["archived", "yes"]], ChannelType::Stream, Refusal::BadArchived),
        (&[], ChannelType::Stream, Refusal::EmptyEdit),
    ];
    for (tags, channel_type, expected) in cases {
        let edit = change(&keys, EDIT_CHANNEL, tags);
        assert_eq!(refusal(&edit, &actor, view(channel_type, ADMIN)), Some(expected));
    }
    let edit = change(&keys, EDIT_CHANNEL, &[&["archived", "true"], &["name", " new "]]);
    let (edited, _) = decide(&edit, &actor, ID, view(ChannelType::Stream, ADMIN)).unwrap();
    assert_eq!((edited.archived, edited.name.as_str()), (true, "new"));
}

#[test]
fn authors_redact_their_own_events_and_moderators_any_of_the_channel() {
    let keys = Keys::generate();
    let actor = Actor::session(keys.pubkey());
    let bad = change(&keys, REDACT, &[&["e", "x"]]);
    assert_eq!(refusal(&bad, &actor, view(ChannelType::Stream, ADMIN)), Some(Refusal::BadRedactTarget));
    let id = "c".repeat(64);
    let redact = change(&keys, REDACT, &[&["e", &id]]);
    assert_eq!(refusal(&redact, &actor, view(ChannelType::Stream, ADMIN)), Some(Refusal::NoSuchEvent));
    let other = buzz_core::Pubkey::parse(&"d".repeat(64)).unwrap();
    let theirs = ModerationView { redacted_author: Some(&other), ..view(ChannelType::Stream, MEMBER) };
    assert_eq!(refusal(&redact, &actor, theirs), Some(Refusal::NotModerator));
    let me = keys.pubkey();
    let mine = ModerationView { redacted_author: Some(&me), ..view(ChannelType::Stream, MEMBER) };
    assert!(decide(&redact, &actor, ID, mine).is_ok());
}

#[test]
fn only_the_channel_owner_or_a_community_admin_deletes_a_channel_and_other_kinds_are_refused() {
    let keys = Keys::generate();
    let actor = Actor::session(keys.pubkey());
    let delete = change(&keys, DELETE_CHANNEL, &[]);
    assert_eq!(refusal(&delete, &actor, view(ChannelType::Stream, ADMIN)), Some(Refusal::ChannelDeletion));
    let owner = ModerationView { own_role: Some(Role::Owner), ..view(ChannelType::Stream, MEMBER) };
    assert_eq!(decide(&delete, &actor, ID, owner).map(|(_, c)| c), Ok(Change::DeleteChannel));
    let other = change(&keys, 9003, &[]);
    assert_eq!(
        refusal(&other, &actor, view(ChannelType::Stream, ADMIN)),
        Some(Refusal::KindNotAccepted(9003))
    );
}
