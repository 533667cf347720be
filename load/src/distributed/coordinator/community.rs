//! The community a run loads: provisioned first when asked, the run's member keys added, the open
//! load channel created and, for the workday, the private channel with its members.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use buzz_core::Keys;
use futures::StreamExt;
use serde_json::json;

use crate::client::Conn;
use crate::distributed::coordinator::args::CoordinatorArgs;
use crate::distributed::members::{member_key, private_member};
use crate::distributed::plan::{Plan, Scenario};
use crate::flags::Target;
use crate::nip98::{post_signed, provision};
use crate::nostr;

/// Member additions in flight at once.
const HTTP_CONCURRENCY: usize = 16;

/// The channels of a run: the open one, and the workday's private one with its member keys.
pub struct Channels {
    pub open: String,
    pub private: Option<(String, Vec<String>)>,
}

/// Provisions (optionally), adds the `pool` member keys of `seed`, creates the open load channel
/// and, for the workday, the private channel with the member keys of [`private_member`].
pub async fn setup(args: &CoordinatorArgs, plan: &Plan, seed: &str, pool: usize) -> Result<Channels> {
    let http = reqwest::Client::builder().timeout(plan.connect_timeout).build().context("HTTP client")?;
    let first = plan.targets.first().context("no target")?;
    let owner = owner(args, &http, first).await?;
    add_members(&http, &owner, first, seed, pool, args.quiet).await?;
    create_channels(&owner, first, plan, seed, pool).await
}

/// The owner's key (generated and shown when not given), its community provisioned when the
/// operator API is given.
async fn owner(args: &CoordinatorArgs, http: &reqwest::Client, first: &Target) -> Result<Keys> {
    let (owner, generated) = args.community.owner()?;
    if generated {
        eprintln!("buzz-load coordinator: generated community owner key, secret {}", owner.secret_hex());
    }
    if let Some(op_url) = &args.community.operator_url {
        let op = args.community.operator()?;
        provision(http, &op, op_url, &first.host, &owner).await.context("provisioning the community")?;
    }
    Ok(owner)
}

/// Adds member keys `0..pool` of `seed` over the members API of the first gateway.
async fn add_members(
    http: &reqwest::Client,
    owner: &Keys,
    first: &Target,
    seed: &str,
    pool: usize,
    quiet: bool,
) -> Result<()> {
    let url = format!("{}/api/members", first.http_base());
    // https is always accepted (http only for loopback hosts).
    let signed_url = format!("https://{}/api/members", first.host);
    let host = (first.host != first.authority).then_some(first.host.as_str());
    let started = Instant::now();
    let results: Vec<Result<()>> = futures::stream::iter(0..pool)
        .map(|i| {
            let body = json!({"pubkey": member_key(seed, i).public_hex(), "role": "member"});
            let (url, signed_url) = (&url, &signed_url);
            async move { post_signed(http, owner, url, signed_url, host, &body).await }
        })
        .buffer_unordered(HTTP_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>>>().context("adding members")?;
    if !quiet {
        eprintln!(
            "buzz-load coordinator: {pool} member(s) added in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// Creates the open load channel and, for the workday, the private one with its members.
async fn create_channels(
    owner: &Keys,
    first: &Target,
    plan: &Plan,
    seed: &str,
    pool: usize,
) -> Result<Channels> {
    let t = plan.connect_timeout;
    let channel = nostr::buzz_channel_id();
    let mut conn = Conn::connect(first, t).await?;
    conn.authenticate(owner, t).await.context("owner AUTH")?;
    conn.publish_and_confirm(&nostr::create_channel_event(owner, &channel), t)
        .await
        .context("creating the load channel")?;
    let private = if plan.scenario == Scenario::Workday {
        let id = nostr::buzz_channel_id();
        conn.publish_and_confirm(&nostr::create_private_channel_event(owner, &id), t)
            .await
            .context("creating the private channel")?;
        let members: Vec<String> =
            (0..pool).filter(|i| private_member(*i)).map(|i| member_key(seed, i).public_hex()).collect();
        for pk in &members {
            conn.publish_and_confirm(&nostr::put_user_event(owner, &id, pk), t)
                .await
                .context("adding a private-channel member")?;
        }
        Some((id, members))
    } else {
        None
    };
    conn.close(Duration::from_secs(1)).await;
    Ok(Channels { open: channel, private })
}
