//! NIP-42 `AUTH` on a socket: the challenge answer, then community membership (or a NIP-OA
//! agent's owner's).

use buzz_bus::Actor;
use buzz_core::{Event, RelayMessage};

use super::session::Session;
use super::writes::verify;

impl Session {
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
