//! Community membership (`POST/DELETE /api/members`, and the NIP-86 methods mapped onto the same
//! rules, `rules::manage`): who manages members, who may grant which role and remove whom.

use buzz_bus::{Actor, Scope};
use buzz_store::Role;

use super::Refusal;

/// The credential may manage members (`members:write`); checked before anything is read.
pub fn scope(actor: &Actor) -> Result<(), Refusal> {
    if actor.has_scope(Scope::MembersWrite) {
        Ok(())
    } else {
        Err(Refusal::MembersScope)
    }
}

/// The actor's community role, when it manages members: an owner or an admin.
pub fn manager(role: Option<Role>) -> Result<Role, Refusal> {
    role.filter(|r| r.is_admin()).ok_or(Refusal::NotMemberManager)
}

/// Who may grant what: owners grant admin or member; admins grant member. Nobody grants owner
/// (the owner is set when the operator provisions the community) and nobody changes the owner.
fn may_grant(actor: Role, target_previous: Option<Role>, role: Role) -> bool {
    match actor {
        Role::Owner => role != Role::Owner && target_previous != Some(Role::Owner),
        Role::Admin => role == Role::Member && target_previous.is_none_or(|r| r == Role::Member),
        Role::Member => false,
    }
}

/// Who may remove whom: owners anyone but the owner, admins members (the rule of `DELETE
/// /api/members`, NIP-86 `unallowpubkey` and `banpubkey`).
pub(crate) fn may_remove(actor: Role, target: Role) -> bool {
    match actor {
        Role::Owner => target != Role::Owner,
        Role::Admin => target == Role::Member,
        Role::Member => false,
    }
}

/// `me` grants `role` to a key whose role is `previous` (`None`: no member yet).
pub fn grant(me: Role, previous: Option<Role>, role: Role) -> Result<(), Refusal> {
    if may_grant(me, previous, role) {
        Ok(())
    } else {
        Err(Refusal::RoleNotGrantable)
    }
}

/// A key banned from the community (NIP-86 `banpubkey`) gets no membership until unbanned.
pub fn not_banned(banned: bool) -> Result<(), Refusal> {
    if banned {
        Err(Refusal::BannedKey)
    } else {
        Ok(())
    }
}

/// `me` removes a key whose role is `target`: a member (`None`: none), that `me` may remove.
pub fn remove(me: Role, target: Option<Role>) -> Result<(), Refusal> {
    let target = target.ok_or(Refusal::NoSuchMember)?;
    if may_remove(me, target) {
        Ok(())
    } else {
        Err(Refusal::MemberNotRemovable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_grant_admins_admins_grant_members_and_nobody_grants_owner() {
        assert!(may_grant(Role::Owner, None, Role::Admin));
        assert!(may_grant(Role::Owner, Some(Role::Admin), Role::Member));
        assert!(!may_grant(Role::Owner, None, Role::Owner));
        assert!(!may_grant(Role::Owner, Some(Role::Owner), Role::Member));
        assert!(may_grant(Role::Admin, None, Role::Member));
        assert!(!may_grant(Role::Admin, None, Role::Admin));
        assert!(!may_grant(Role::Admin, Some(Role::Admin), Role::Member));
        assert!(!may_grant(Role::Member, None, Role::Member));
    }

    #[test]
    fn a_removal_names_a_member_the_actor_may_remove() {
        assert_eq!(remove(Role::Owner, None), Err(Refusal::NoSuchMember));
        assert_eq!(remove(Role::Admin, Some(Role::Admin)), Err(Refusal::MemberNotRemovable));
        assert_eq!(remove(Role::Owner, Some(Role::Owner)), Err(Refusal::MemberNotRemovable));
        assert_eq!(remove(Role::Owner, Some(Role::Admin)), Ok(()));
        assert_eq!(remove(Role::Admin, Some(Role::Member)), Ok(()));
    }

    #[test]
    fn only_owners_and_admins_with_members_write_manage_members() {
        let actor = Actor::session(buzz_core::Keys::generate().pubkey());
        assert_eq!(scope(&actor), Ok(()));
        let read_only = Actor { scopes: vec![Scope::MessagesRead], ..actor };
        assert_eq!(scope(&read_only), Err(Refusal::MembersScope));
        assert_eq!(manager(Some(Role::Member)), Err(Refusal::NotMemberManager));
        assert_eq!(manager(None), Err(Refusal::NotMemberManager));
        assert_eq!(manager(Some(Role::Admin)), Ok(Role::Admin));
    }
}
