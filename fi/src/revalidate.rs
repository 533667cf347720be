//! `<p>.v1.fi.revalidate`: what the policy-service's revalidator tells every gateway each sweep.

use buzz_core::CommunityId;
use serde::{Deserialize, Serialize};

/// The communities whose stored policy requires FI at the time of the sweep's read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revalidate {
    /// Every community that requires FI, with its policy generation.
    pub required: Vec<RequiredCommunity>,
}

/// A community whose stored policy requires FI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequiredCommunity {
    /// The community.
    pub community_id: CommunityId,
    /// Its policy generation at the sweep's read.
    pub policy_generation: i64,
}
