//! NIP-42 `AUTH` on a socket: the challenge answer, then community membership (or a NIP-OA
//! agent's owner's) and NIP-86 bans; and how the socket loses it (a membership removal, a ban).

use buzz_bus::{AccessChanged, Actor, BusError, MemberReply};
use buzz_core::{Event, Pubkey, RelayMessage};

use super::session::Session;
use super::writes::verify;

impl Session {
    /// An access change of the socket's community: a removal of its key (or of the owner an agent
    /// acts for) drops authentication; a ban of it also closes the socket; a channel change drops
    /// the cached answer.
    pub(super) fn on_access(&mut self, change: &AccessChanged) {
        let acting = |s: &Self, key: &Pubkey| {
            s.actor.as_ref().is_some_and(|a| &a.pubkey == key || a.member_key() == key)
        };
        match change {
            AccessChanged::MemberRemoved { pubkey } => {
                if acting(self, pubkey) {
                    self.removed_key = Some(pubkey.clone());
                    self.deauthenticate();
                }
            }
            AccessChanged::Banned { pubkey } => {
                if acting(self, pubkey) || self.removed_key.as_ref() == Some(pubkey) {
                    self.deauthenticate();
                    self.send(RelayMessage::Notice("restricted: banned from this community".into()));
                    self.close(1008, "banned");
                    self.banned = true;
                }
            }
            AccessChanged::Channel { channel_id } => {
                self.read_cache.remove(channel_id);
            }
        }
    }

    /// The socket's key lost its community membership: drop authentication and every subscription.
    pub(super) fn deauthenticate(&mut self) {
        self.actor = None;
        self.read_cache.clear();
        self.reads.cancel_all();
        let ids: Vec<String> = self.subs.map.drain().map(|(id, _)| id).collect();
        for sub_id in ids {
            let message = "restricted: no longer a member of this community".to_owned();
            self.send(RelayMessage::Closed { sub_id, message });
        }
    }

    pub(super) async fn on_auth(&mut self, event: Event) {
        let id = event.id.clone();
        let reply = |accepted: bool, message: String| RelayMessage::Ok { id: id.clone(), accepted, message };
        let (event, owner) = match verify(event, true).await {
            Ok(v) => v,
            Err(reason) => return self.send(reply(false, reason)),
        };
        if let Err(reason) =
            buzz_core::nip42::validate_auth_event(&event, &self.challenge, &self.host, buzz_core::unix_now())
        {
            return self.send(reply(false, format!("invalid: {reason}")));
        }
        // An FI-admitted socket binds its evidence here: AUTH must prove the evidence's key.
        if self.fi.as_ref().is_some_and(|fi| fi.nostr_pubkey != event.pubkey) {
            return self.send(reply(false, "restricted: evidence rejected".into()));
        }
        // A NIP-OA agent authenticates with its owner's grant in the AUTH event.
        let mut actor = Actor::session(event.pubkey.clone());
        actor.fi_admitted = self.fi.is_some();
        match self.standings(&event.pubkey, owner.as_ref()).await {
            Ok((key, of)) => match admit(&key, of.as_ref()) {
                Ok(as_agent) => {
                    actor.agent_of = owner.filter(|_| as_agent);
                    self.actor = Some(actor);
                    self.read_cache.clear();
                    self.send(reply(true, String::new()));
                }
                Err(reason) => self.send(reply(false, format!("restricted: {reason}"))),
            },
            Err(e) => self.send(reply(false, e.nip01())),
        }
    }

    /// The AUTH key's standing in the community, and its grant owner's when the key is neither a
    /// member nor banned itself (asked over the bus, never cached).
    async fn standings(
        &self,
        key: &Pubkey,
        owner: Option<&Pubkey>,
    ) -> Result<(MemberReply, Option<MemberReply>), BusError> {
        let community = self.community.community_id;
        let mine = self.state.access.membership(community, key).await?;
        let theirs = match owner {
            Some(owner) if mine.role.is_none() && !mine.banned => {
                Some(self.state.access.membership(community, owner).await?)
            }
            _ => None,
        };
        Ok((mine, theirs))
    }

    /// Whether `actor` still may act here after an access change: its member key (an agent's
    /// owner) is a member and not banned, and an agent's own key is not banned.
    pub(super) async fn still_admitted(&self, actor: &Actor) -> Result<bool, BusError> {
        let community = self.community.community_id;
        if !self.state.access.member(community, actor.member_key()).await? {
            return Ok(false);
        }
        if actor.agent_of.is_none() {
            return Ok(true);
        }
        Ok(!self.state.access.membership(community, &actor.pubkey).await?.banned)
    }
}

/// AUTH refusals (all `restricted:`).
const BANNED: &str = "banned from this community";
const OWNER_BANNED: &str = "the grant's owner is banned from this community";
const NOT_MEMBER: &str = buzz_core::refusal::NOT_COMMUNITY_MEMBER;

/// Who an AUTH admits, from the key's standing and (when it is no member itself and carries a
/// grant) its owner's: `Ok(false)` the key as itself, `Ok(true)` as the owner's agent. A ban
/// holds for the key in every role it could enter by: a banned key is refused even with a
/// member's grant, and no agent is admitted for a banned owner.
fn admit(key: &MemberReply, owner: Option<&MemberReply>) -> Result<bool, &'static str> {
    if key.banned {
        return Err(BANNED);
    }
    if key.role.is_some() {
        return Ok(false);
    }
    match owner {
        Some(o) if o.banned => Err(OWNER_BANNED),
        Some(o) if o.role.is_some() => Ok(true),
        _ => Err(NOT_MEMBER),
    }
}

#[cfg(test)]
mod tests {
    use buzz_bus::Role;

    use super::*;

    fn standing(role: Option<Role>, banned: bool) -> MemberReply {
        MemberReply { role, banned }
    }

    #[test]
    fn a_ban_refuses_auth_as_a_member_as_an_agent_and_for_an_agents_owner() {
        let member = standing(Some(Role::Member), false);
        let stranger = standing(None, false);
        let banned = standing(None, true);
        assert_eq!(admit(&member, None), Ok(false));
        assert_eq!(admit(&member, Some(&banned)), Ok(false), "a member acts as itself");
        assert_eq!(admit(&stranger, Some(&member)), Ok(true));
        assert_eq!(admit(&stranger, None), Err(NOT_MEMBER));
        assert_eq!(admit(&stranger, Some(&stranger)), Err(NOT_MEMBER));
        // A banned key, with a member's grant or without; a key banned while still a member.
        assert_eq!(admit(&banned, Some(&member)), Err(BANNED));
        assert_eq!(admit(&banned, None), Err(BANNED));
        assert_eq!(admit(&standing(Some(Role::Admin), true), None), Err(BANNED));
        // The agent of a banned owner.
        assert_eq!(admit(&stranger, Some(&banned)), Err(OWNER_BANNED));
        assert_eq!(admit(&stranger, Some(&standing(Some(Role::Member), true))), Err(OWNER_BANNED));
    }
}
