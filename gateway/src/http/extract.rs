//! Request context as axum extractors, so that a handler's signature says what it needs: the
//! community of the request's Host ([`Tenant`]), and who is acting with the body they signed
//! ([`Signed`], [`Nip98Signed`]). They run before the handler in argument order; each refusal is
//! the contract's JSON (through [`ApiError`], or the framework's own rejection that
//! `buzz_http_auth::contract_errors` turns into JSON, e.g. `413 too_large`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use buzz_bus::{Actor, CommunityLease};
use buzz_http_auth::ApiError;

use crate::http::request::{bearer, community_for, http_actor};
use crate::state::AppState;

/// The community bound to the request's Host (normalised); unknown hosts are 404 `unknown_host`.
pub struct Tenant {
    /// The normalised host the request named.
    pub host: String,
    /// The community's lease from the policy-service (cached by [`crate::hosts::HostCache`]).
    pub community: CommunityLease,
}

impl FromRequestParts<Arc<AppState>> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, ApiError> {
        let (host, community) = community_for(state, &parts.headers).await?;
        // NIP-86 `blockip`: the host refuses the address (NIP-86 itself does not go through
        // here, so its owner and admins can always unblock).
        let peer = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>();
        if peer.is_some_and(|p| community.blocked_ips.contains(&p.0.ip().to_canonical())) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "blocked",
                "this address is blocked on this host",
            ));
        }
        Ok(Self { host, community })
    }
}

/// An authenticated request of a tenant: its community, its actor (a bearer token's actor, or a
/// NIP-98 signer with every scope) and the body the signature covers. The signed `u` must name
/// this host and the request's path and query.
pub struct Signed {
    /// The community of the Host.
    pub community: CommunityLease,
    /// Who is acting.
    pub actor: Actor,
    /// The request body (bounded by `max_message_length`).
    pub body: Bytes,
}

/// Like [`Signed`], but NIP-98 only: a bearer token is 403 `restricted` (e.g. a token cannot mint
/// tokens).
pub struct Nip98Signed(pub Signed);

impl FromRequest<Arc<AppState>> for Signed {
    type Rejection = Response;

    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Self, Response> {
        signed(req, state, false).await
    }
}

impl FromRequest<Arc<AppState>> for Nip98Signed {
    type Rejection = Response;

    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Self, Response> {
        signed(req, state, true).await.map(Self)
    }
}

/// Body first (an oversized body is 413 before anything else), then the Host's community, then
/// the credential.
async fn signed(req: Request, state: &Arc<AppState>, nip98_only: bool) -> Result<Signed, Response> {
    let (mut parts, body) = req.into_parts();
    let body = Bytes::from_request(Request::from_parts(parts.clone(), body), state)
        .await
        .map_err(IntoResponse::into_response)?;
    let tenant = Tenant::from_request_parts(&mut parts, state).await.map_err(IntoResponse::into_response)?;
    if nip98_only && bearer(&parts.headers).is_some() {
        let message = "tokens are issued only to NIP-98 signed requests";
        return Err(ApiError::new(StatusCode::FORBIDDEN, "restricted", message).into_response());
    }
    let path_and_query = parts.uri.path_and_query().map_or_else(|| parts.uri.path(), |p| p.as_str());
    let actor = http_actor(state, &parts.headers, &tenant.host, parts.method.as_str(), path_and_query, &body)
        .await
        .map_err(IntoResponse::into_response)?;
    Ok(Signed { community: tenant.community, actor, body })
}
