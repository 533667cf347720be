//! One community's share of this process's snapshot operations. "Each process runs at most four
//! snapshot operations at once" is a limit shared by every community; a community that keeps
//! that many requests in flight (starts refused by a quota, pages of its own captures) would
//! answer every other community's request `503 snapshot_unavailable`. Each community may hold at
//! most its share of the operations at once (by default half), so another community's request
//! always finds one free while only one community crowds the process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use buzz_core::CommunityId;

/// The operations each community holds in this process, and the most one may hold.
#[derive(Debug)]
pub struct OperationShares {
    /// The most operations one community may hold at once.
    limit: usize,
    /// Operations held now, by community (a community holding none has no entry).
    held: Mutex<HashMap<CommunityId, usize>>,
}

/// One operation of a community; dropping it gives the share back.
#[derive(Debug)]
pub struct Share {
    shares: Arc<OperationShares>,
    community: CommunityId,
}

impl OperationShares {
    /// Shares of at most `limit` operations per community (at least 1).
    #[must_use]
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self { limit: limit.max(1), held: Mutex::new(HashMap::new()) })
    }

    /// One more operation for `community`, unless it already holds its share.
    #[must_use]
    pub fn try_take(self: &Arc<Self>, community: CommunityId) -> Option<Share> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let n = held.entry(community).or_insert(0);
        if *n >= self.limit {
            return None;
        }
        *n += 1;
        Some(Share { shares: self.clone(), community })
    }

    /// Operations `community` holds now.
    #[must_use]
    pub fn held(&self, community: CommunityId) -> usize {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).get(&community).copied().unwrap_or(0)
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = held.get_mut(&self.community) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.community);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_community_holds_at_most_its_share_and_gets_it_back_when_an_operation_ends() {
        let shares = OperationShares::new(2);
        let (noisy, quiet) = (CommunityId::from_u128(1), CommunityId::from_u128(2));
        let a = shares.try_take(noisy).unwrap();
        let b = shares.try_take(noisy).unwrap();
        assert!(shares.try_take(noisy).is_none(), "a third operation of one community");
        let q = shares.try_take(quiet).unwrap();
        assert_eq!((shares.held(noisy), shares.held(quiet)), (2, 1));
        drop(a);
        let c = shares.try_take(noisy).unwrap();
        drop((b, c, q));
        assert_eq!((shares.held(noisy), shares.held(quiet)), (0, 0));
        assert!(shares.held.lock().unwrap().is_empty(), "no entry is kept for a community holding none");
    }
}
