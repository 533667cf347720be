//! buzz mode setup: provision the community (optional), add one member per connection over
//! NIP-98-authenticated HTTP, and create the open load channel as the owner.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use buzz_core::Keys;
use futures::{StreamExt, TryStreamExt};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use serde::Serialize;
use serde_json::json;

use crate::client::Conn;
use crate::config::Config;
use crate::nostr;

/// Member additions in flight at once.
const HTTP_CONCURRENCY: usize = 8;

/// What buzz-mode setup produced.
#[derive(Debug, Clone, Serialize)]
pub struct BuzzSetup {
    /// Set when this run provisioned the community.
    pub community_id: Option<String>,
    pub owner_pubkey: String,
    /// Secret of a generated owner key (only when this run generated it), so the community stays usable.
    #[serde(skip)]
    pub generated_owner_secret: Option<String>,
    pub members_added: usize,
    pub channel: String,
}

fn parse_secret(name: &str, hex: &str) -> Result<Keys> {
    Keys::from_secret_hex(hex.trim()).ok_or_else(|| anyhow!("{name} is not a valid 64-hex secret key"))
}

/// A request to `url` with a fresh NIP-98 header (`buzz_core::nip98`, a nonce per request) whose
/// `u` tag is `signed_url`, and `body` as JSON when there is one: its status and text.
pub(crate) async fn signed_request(
    http: &reqwest::Client,
    keys: &Keys,
    (method, url, signed_url): (reqwest::Method, &str, &str),
    host: Option<&str>,
    body: Option<&serde_json::Value>,
) -> Result<(reqwest::StatusCode, String)> {
    let what = format!("{method} {url}");
    let bytes = body.map(serde_json::to_vec).transpose()?.unwrap_or_default();
    let auth = buzz_core::nip98::authorization_header(keys, method.as_str(), signed_url, &bytes);
    let mut req = http.request(method, url).header(AUTHORIZATION, auth);
    if let Some(h) = host {
        req = req.header(HOST, h);
    }
    if body.is_some() {
        req = req.header(CONTENT_TYPE, "application/json").body(bytes);
    }
    let resp = req.send().await.with_context(|| what.clone())?;
    let status = resp.status();
    Ok((status, resp.text().await.unwrap_or_default()))
}

/// POSTs `body` (JSON) to `url` ([`signed_request`]); an answer other than 2xx is an error.
pub(crate) async fn post_signed(
    http: &reqwest::Client,
    keys: &Keys,
    url: &str,
    signed_url: &str,
    host: Option<&str>,
    body: &serde_json::Value,
) -> Result<()> {
    let (status, text) =
        signed_request(http, keys, (reqwest::Method::POST, url, signed_url), host, Some(body)).await?;
    if !status.is_success() {
        bail!("POST {url}: {status}: {}", text.chars().take(300).collect::<String>());
    }
    Ok(())
}

/// Runs the whole buzz-mode setup; `members` are the keys of every publisher and subscriber.
pub async fn prepare(cfg: &Config, members: &[Keys]) -> Result<BuzzSetup> {
    let http = reqwest::Client::builder()
        .timeout(cfg.connect_timeout)
        .connect_timeout(cfg.connect_timeout)
        .build()
        .context("HTTP client")?;
    let first = cfg.targets.first().context("no target")?;
    let host = first.host.as_str();

    let mut generated_owner_secret = None;
    let owner = match &cfg.owner_secret {
        Some(s) => parse_secret("--owner-secret", s)?,
        None => {
            let k = Keys::generate();
            generated_owner_secret = Some(k.secret_hex());
            k
        }
    };

    let mut community_id = None;
    if let Some(op_url) = &cfg.operator_url {
        let op_keys = parse_secret("--operator-secret", cfg.operator_secret.as_deref().unwrap_or(""))?;
        let id = uuid::Uuid::new_v4().to_string();
        let url = format!("{op_url}/operator/communities");
        let body = json!({"community_id": id, "host": host, "owner_pubkey": owner.public_hex()});
        post_signed(&http, &op_keys, &url, &url, None, &body).await.context("provisioning the community")?;
        community_id = Some(id);
    }

    // The socket goes to the first gateway; Host (and the signed URL) name the community.
    let url = format!("{}/api/members", first.http_base());
    let signed_url = format!("http://{host}/api/members");
    let host_override = (first.host != first.authority).then_some(host);
    futures::stream::iter(members)
        .map(|k| {
            let body = json!({"pubkey": k.public_hex(), "role": "member"});
            let (http, owner, url, signed_url) = (&http, &owner, &url, &signed_url);
            async move { post_signed(http, owner, url, signed_url, host_override, &body).await }
        })
        .buffer_unordered(HTTP_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .context("adding members")?;

    let channel = nostr::buzz_channel_id();
    create_channel(&owner, cfg, &channel).await.context("creating the load channel")?;
    Ok(BuzzSetup {
        community_id,
        owner_pubkey: owner.public_hex(),
        generated_owner_secret,
        members_added: members.len(),
        channel,
    })
}

async fn create_channel(owner: &Keys, cfg: &Config, channel: &str) -> Result<()> {
    let target = cfg.targets.first().context("no target")?;
    let mut conn = Conn::connect(target, cfg.connect_timeout).await?;
    conn.authenticate(owner, cfg.connect_timeout).await.context("owner AUTH")?;
    let ev = nostr::create_channel_event(owner, channel);
    conn.publish_and_confirm(&ev, cfg.connect_timeout).await?;
    conn.close(Duration::from_secs(1)).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_same_request_twice_in_one_second_is_signed_twice() {
        // The relay spends each NIP-98 event id once; two identical requests within one second
        // (a retried member addition) must not share one.
        let operator = Keys::generate();
        let relay = crate::mock::MockRelay::start(true, &operator.public_hex()).await;
        let url = format!("http://{}/operator/communities", relay.addr);
        let body = json!({
            "community_id": uuid::Uuid::new_v4().to_string(),
            "host": "team.test",
            "owner_pubkey": operator.public_hex(),
        });
        let http = reqwest::Client::new();
        post_signed(&http, &operator, &url, &url, None, &body).await.expect("first");
        post_signed(&http, &operator, &url, &url, None, &body).await.expect("second");
        assert_eq!(relay.http_count("/operator/communities"), 2);
    }
}
