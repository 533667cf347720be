//! `<p>.v1.fi.revalidate`: what the policy-service's revalidator tells every gateway each sweep.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The communities whose stored policy requires FI at the time of the sweep's read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revalidate {
    pub required: Vec<RequiredCommunity>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequiredCommunity {
    pub community_id: Uuid,
    pub policy_generation: i64,
}
