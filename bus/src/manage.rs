//! `<p>.v1.manage`: NIP-86 community management, sent by the gateway, answered by the
//! write-service. A subject of its own, so a previous release's write-service (which does not
//! subscribe to it) never receives a request it cannot read.

use buzz_core::nip86::Call;
use buzz_core::CommunityId;
use serde::{Deserialize, Serialize};

use crate::{Actor, BusError};

/// One NIP-86 call of a NIP-98 signer in a community.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManageRequest {
    /// The community of the request's host.
    pub community_id: CommunityId,
    /// Who calls (a NIP-98 session; must be the community's owner or an admin).
    pub actor: Actor,
    /// The method and its parameters.
    pub call: Call,
}

/// The JSON-RPC `result` of the call, or why it was refused (its code gives the HTTP status).
pub type ManageReply = Result<serde_json::Value, BusError>;
