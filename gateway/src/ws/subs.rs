//! Subscriptions of one socket and the pure rules of live delivery.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use buzz_bus::{Actor, Audience, LiveEvent, Scope};
use buzz_core::Filter;

/// Live events that arrive while stored events are still being sent are held back until `EOSE`
/// and then sent unless they were already part of the stored answer.
pub struct Pending {
    /// Live events held back, in arrival order, with their event JSON.
    pub buffer: Vec<(Arc<LiveEvent>, Arc<str>)>,
    /// Ids of the stored events already sent, so a held event is not sent twice.
    pub sent: HashSet<buzz_core::EventId>,
}

/// One open REQ subscription of a socket.
pub struct Sub {
    /// The REQ's filters; a live event is sent if any matches.
    pub filters: Vec<Filter>,
    /// Distinguishes this REQ from an earlier one with the same id.
    pub generation: u64,
    /// Live events held until `EOSE`; `None` once the stored events were sent.
    pub pending: Option<Pending>,
    /// Counts this subscription in `buzz_gateway_subscriptions` while it lives.
    _gauge: super::meter::SubscriptionGauge,
}

/// Most live events held for one subscription before `EOSE`; beyond that the subscription is
/// closed (the client re-subscribes and replays).
pub const MAX_PENDING: usize = 10_000;

/// The subscriptions of one socket.
#[derive(Default)]
pub struct Subs {
    /// Open subscriptions by subscription id.
    pub map: HashMap<String, Sub>,
    next_generation: u64,
}

impl Subs {
    /// Adds or replaces `id` (NIP-01: a REQ with an existing id replaces it). Returns the
    /// generation, or `None` when the socket already has `max` other subscriptions.
    pub fn open(&mut self, id: &str, filters: Vec<Filter>, max: usize) -> Option<u64> {
        if !self.map.contains_key(id) && self.map.len() >= max {
            return None;
        }
        self.next_generation += 1;
        let generation = self.next_generation;
        let pending = Some(Pending { buffer: Vec::new(), sent: HashSet::new() });
        self.map.insert(
            id.to_owned(),
            Sub { filters, generation, pending, _gauge: super::meter::SubscriptionGauge::open() },
        );
        Some(generation)
    }

    /// The subscription `id` if it is still the REQ of `generation`.
    pub fn current(&mut self, id: &str, generation: u64) -> Option<&mut Sub> {
        self.map.get_mut(id).filter(|s| s.generation == generation)
    }
}

/// Whether `sub` asks for the live event `ev` (before access). NIP-AR: an `artifact: current`
/// subscription also receives what took an artifact out of its results
/// (see `Filter::matched_replaced`).
#[must_use]
pub fn wants(sub: &Sub, ev: &LiveEvent) -> bool {
    sub.filters.iter().any(|f| f.matches(&ev.event) || f.matched_replaced(&ev.event, &ev.replaced_tags))
}

/// Whether an authenticated actor may receive a live event, before any per-channel lookup.
/// `Some(answer)` when decided here, `None` when the channel's member list must be consulted.
#[must_use]
pub fn live_access(actor: &Actor, event: &LiveEvent) -> Option<bool> {
    let (audience, channel) = (event.audience, event.channel_id);
    if !actor.has_scope(Scope::MessagesRead) || event.banned.iter().any(|k| k == actor.member_key()) {
        return Some(false);
    }
    let Some(channel) = channel else { return Some(false) };
    if let Some(ids) = &actor.channel_ids {
        if !ids.contains(&channel) {
            return Some(false);
        }
    }
    match audience {
        Audience::Community => Some(true),
        Audience::ChannelMembers => None,
    }
}

#[cfg(test)]
mod tests {
    use buzz_core::{ChannelId, CommunityId};

    use super::*;

    #[test]
    fn a_req_with_an_existing_id_replaces_it_and_the_limit_counts_other_ids() {
        let mut subs = Subs::default();
        let g1 = subs.open("a", vec![], 1).unwrap();
        let g2 = subs.open("a", vec![], 1).unwrap();
        assert_ne!(g1, g2);
        assert!(subs.current("a", g1).is_none());
        assert!(subs.current("a", g2).is_some());
        assert!(subs.open("b", vec![], 1).is_none());
    }

    fn live(audience: Audience, channel: Option<ChannelId>, banned: Vec<buzz_core::Pubkey>) -> LiveEvent {
        let keys = buzz_core::Keys::generate();
        LiveEvent {
            community_id: CommunityId::nil(),
            channel_id: channel,
            audience,
            event: keys.sign_new(9, vec![], ""),
            access_version: 0,
            banned,
            replaced_tags: Vec::new(),
        }
    }

    #[test]
    fn live_access_follows_scope_restriction_bans_and_audience() {
        let c = ChannelId::from_u128(1);
        let key = buzz_core::Pubkey::parse(&"a".repeat(64)).unwrap();
        let actor = Actor::session(key.clone());
        assert_eq!(live_access(&actor, &live(Audience::Community, Some(c), vec![])), Some(true));
        assert_eq!(live_access(&actor, &live(Audience::ChannelMembers, Some(c), vec![])), None);
        assert_eq!(live_access(&actor, &live(Audience::Community, None, vec![])), Some(false));
        let banned = live(Audience::Community, Some(c), vec![key]);
        assert_eq!(live_access(&actor, &banned), Some(false));
        let restricted = Actor { channel_ids: Some(vec![ChannelId::from_u128(2)]), ..actor.clone() };
        assert_eq!(live_access(&restricted, &live(Audience::Community, Some(c), vec![])), Some(false));
        let write_only = Actor { scopes: vec![Scope::MessagesWrite], ..actor };
        assert_eq!(live_access(&write_only, &live(Audience::Community, Some(c), vec![])), Some(false));
    }
}
