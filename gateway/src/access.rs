//! The access questions the gateway cannot answer alone (the query-service holds the data, on
//! `<p>.v2.access`): is a key a member, may a reader read a channel now, whom does a bearer token
//! authenticate. One client for the socket and the HTTP paths, so both ask the same way.

use buzz_bus::retry::Retry;
use buzz_bus::{AccessRequest, Actor, BusError, CanReadReply, MemberReply, Subjects, TokenReply};
use buzz_core::{ChannelId, CommunityId, Pubkey};

/// Asks the query-service's access subject, hedged per `retry` (the requests are reads).
pub struct AccessClient {
    nats: buzz_bus::Bus,
    subject: String,
    retry: Retry,
}

impl AccessClient {
    /// A client that asks over `nats` on `subjects.access()`, retrying per `retry`.
    #[must_use]
    pub fn new(nats: buzz_bus::Bus, subjects: &Subjects, retry: Retry) -> Self {
        Self { nats, subject: subjects.access(), retry }
    }

    async fn ask<R: serde::de::DeserializeOwned>(&self, req: &AccessRequest) -> Result<R, BusError> {
        buzz_bus::retry::request_retrying(&self.nats, self.subject.clone(), req, self.retry).await
    }

    /// `pubkey`'s role in `community` and whether it is banned there.
    pub async fn membership(&self, community: CommunityId, pubkey: &Pubkey) -> Result<MemberReply, BusError> {
        let req = AccessRequest::Member { community_id: community, pubkey: pubkey.clone() };
        self.ask(&req).await
    }

    /// `pubkey` has a role in `community` and is not banned there (an agent asks with its
    /// owner's key).
    pub async fn member(&self, community: CommunityId, pubkey: &Pubkey) -> Result<bool, BusError> {
        let reply = self.membership(community, pubkey).await?;
        Ok(reply.role.is_some() && !reply.banned)
    }

    /// `reader` may read `channel` of `community` now.
    pub async fn can_read(
        &self,
        community: CommunityId,
        reader: &Actor,
        channel: ChannelId,
    ) -> Result<bool, BusError> {
        let req =
            AccessRequest::CanRead { community_id: community, reader: reader.clone(), channel_id: channel };
        let reply: CanReadReply = self.ask(&req).await?;
        Ok(reply.can_read)
    }

    /// The actor the token whose sha256 hex is `token_hash` authenticates as in `community`;
    /// `None` when it is unknown, expired or revoked.
    pub async fn token(
        &self,
        community: CommunityId,
        token_hash: buzz_core::TokenHash,
    ) -> Result<Option<Actor>, BusError> {
        let req = AccessRequest::Token { community_id: community, token_hash };
        let reply: TokenReply = self.ask(&req).await?;
        Ok(reply.token)
    }
}
