//! buzz mode setup: provision the community (optional), add one member per connection over
//! NIP-98-authenticated HTTP, and create the open load channel as the owner.

use std::time::Duration;

use anyhow::{Context, Result};
use buzz_core::Keys;
use futures::{StreamExt, TryStreamExt};
use serde::Serialize;
use serde_json::json;

use crate::client::Conn;
use crate::nip98::{post_signed, provision};
use crate::nostr;
use crate::single::config::Config;

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

/// Runs the whole buzz-mode setup; `members` are the keys of every publisher and subscriber.
pub async fn prepare(cfg: &Config, members: &[Keys]) -> Result<BuzzSetup> {
    let http = reqwest::Client::builder()
        .timeout(cfg.connect_timeout)
        .connect_timeout(cfg.connect_timeout)
        .build()
        .context("HTTP client")?;
    let first = cfg.targets.first().context("no target")?;
    let host = first.host.as_str();

    let (owner, generated) = cfg.community.owner()?;
    let generated_owner_secret = generated.then(|| owner.secret_hex());
    let mut community_id = None;
    if let Some(op_url) = &cfg.community.operator_url {
        let op_keys = cfg.community.operator()?;
        let id =
            provision(&http, &op_keys, op_url, host, &owner).await.context("provisioning the community")?;
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
