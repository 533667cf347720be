//! NIP-42 `AUTH` on a socket: the challenge answer, then community membership (or a NIP-OA
//! agent's owner's); and how the socket loses it (a membership removal, a NIP-86 ban).

use buzz_bus::{AccessChanged, Actor};
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
        let mut admitted = self.is_member(&event.pubkey).await;
        if let (Ok(false), Some(owner)) = (&admitted, owner) {
            admitted = self.is_member(&owner).await;
            actor.agent_of = Some(owner);
        }
        match admitted {
            Ok(true) => {
                self.actor = Some(actor);
                self.read_cache.clear();
                self.send(reply(true, String::new()));
            }
            Ok(false) => self.send(reply(false, "restricted: not a member of this community".into())),
            Err(e) => self.send(reply(false, e.nip01())),
        }
    }
}
