//! A NIP-86 ban holds for the key itself in every role it could enter by (issue 37 item 6),
//! through two gateways: as an agent with any member's NIP-OA grant (at AUTH and on every write,
//! the write-service's own check included), with a bearer token or NIP-98 it signed before the
//! ban, as the owner an agent acts for, and against an add of the same key made while the ban
//! commits.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use buzz_bus::Actor;
use buzz_core::nipoa::grant;
use buzz_core::Keys;
use buzz_tests::client::{create_channel, WsClient};
use buzz_tests::cluster::eventually;
use buzz_tests::helpers::{ok, tag, tagged};
use buzz_tests::nip86::{agent_auth, call, ok as rpc_ok, write_over_bus};
use buzz_tests::{Cluster, Community};
use reqwest::Method;
use serde_json::json;
use uuid::Uuid;

const BANNED: &str = "restricted: banned from this community";
const OWNER_BANNED: &str = "restricted: the grant's owner is banned from this community";
const BANNED_WRITE: &str = "blocked: that key is banned from this community";

async fn open_channel(cluster: &Cluster, team: &Community) -> Uuid {
    let channel = Uuid::new_v4();
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    ok(&mut owner, &create_channel(&team.owner, channel, "general", "open")).await;
    channel
}

async fn ban(cluster: &Cluster, g: usize, team: &Community, key: &Keys) {
    rpc_ok(cluster, g, team, &team.owner, "banpubkey", &json!([key.public_hex(), "spam"])).await;
}

/// An unauthenticated socket: EVENT and REQ are `auth-required:`.
async fn shut_out(ws: &mut WsClient, key: &Keys, channel: Uuid, grant: &[String]) {
    let (accepted, why) = ws.publish(&tagged(key, 9, channel, vec![grant.to_vec()])).await;
    assert!(!accepted && why.starts_with("auth-required:"), "{why}");
    let closed = ws.req("r", &[json!({"kinds": [9]})]).await.closed.unwrap_or_default();
    assert!(closed.starts_with("auth-required:"), "{closed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_key_cannot_come_back_as_the_agent_of_any_member() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let carol = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let channel = open_channel(&cluster, &team).await;

    // A banned member's key with a grant from another member: refused at AUTH on both gateways.
    ban(&cluster, 0, &team, &bob).await;
    let bob_grant = grant(&carol, &bob.public_hex(), "kind=9");
    for g in 0..2 {
        let mut ws = WsClient::connect(cluster.gateways[g], &team.host).await.unwrap();
        assert_eq!(agent_auth(&mut ws, &bob, &bob_grant).await, (false, BANNED.to_owned()), "gateway {g}");
        shut_out(&mut ws, &bob, channel, &bob_grant).await;
    }

    // A bot acting for carol, closed by its ban, does not come back with its old grant.
    let bot = Keys::generate();
    let bot_grant = grant(&carol, &bot.public_hex(), "kind=9");
    let mut b0 = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    assert_eq!(agent_auth(&mut b0, &bot, &bot_grant).await, (true, String::new()));
    ok(&mut b0, &tagged(&bot, 9, channel, vec![bot_grant.clone()])).await;
    ban(&cluster, 1, &team, &bot).await;
    let (_, code) = b0.drain_until_closed(Duration::from_secs(5)).await.expect("the bot's socket closed");
    assert_eq!(code, Some(1008));
    let mut b1 = WsClient::connect(cluster.gateways[1], &team.host).await.unwrap();
    assert_eq!(agent_auth(&mut b1, &bot, &bot_grant).await, (false, BANNED.to_owned()));
    shut_out(&mut b1, &bot, channel, &bot_grant).await;

    // An agent acting for a banned key is refused too, though its own key is not banned.
    let dave = cluster.member(&team).await;
    let helper = Keys::generate();
    let helper_grant = grant(&dave, &helper.public_hex(), "");
    let mut h1 = WsClient::connect(cluster.gateways[1], &team.host).await.unwrap();
    assert_eq!(agent_auth(&mut h1, &helper, &helper_grant).await, (true, String::new()));
    ban(&cluster, 0, &team, &dave).await;
    let (_, code) = h1.drain_until_closed(Duration::from_secs(5)).await.expect("the helper's socket closed");
    assert_eq!(code, Some(1008));
    let mut h0 = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    assert_eq!(agent_auth(&mut h0, &helper, &helper_grant).await, (false, OWNER_BANNED.to_owned()));
    shut_out(&mut h0, &helper, channel, &helper_grant).await;

    // Lifted, the ban lets the agent back in.
    rpc_ok(&cluster, 1, &team, &team.owner, "unbanpubkey", &json!([bot.public_hex()])).await;
    let mut again = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    assert_eq!(agent_auth(&mut again, &bot, &bot_grant).await, (true, String::new()));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_service_refuses_every_write_of_a_banned_agent_and_of_an_agent_of_a_banned_key() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let carol = cluster.member(&team).await;
    let dave = cluster.member(&team).await;
    let channel = open_channel(&cluster, &team).await;
    let (bot, helper) = (Keys::generate(), Keys::generate());
    let agent =
        |key: &Keys, owner: &Keys| Actor { agent_of: Some(owner.pubkey()), ..Actor::session(key.pubkey()) };
    // Each write family: a kind-9 post (group commit), a NIP-AR revision (its own group commit),
    // a channel creation and a redaction (one at a time).
    let writes = |key: &Keys, owner: &Keys| {
        let g = grant(owner, &key.public_hex(), "");
        let d = Uuid::new_v4();
        let revision = key.sign_new(
            45010,
            vec![
                tag("ar", "1"),
                tag("d", d),
                tag("h", channel),
                tag("type", "t"),
                tag("op", "create"),
                g.clone(),
            ],
            "{}",
        );
        let create = key.sign_new(9007, vec![tag("h", Uuid::new_v4()), tag("name", "x"), g.clone()], "");
        let redact = tagged(key, 9005, channel, vec![tag("e", "0".repeat(64)), g.clone()]);
        vec![tagged(key, 9, channel, vec![g]), revision, create, redact]
    };

    // Not banned: the bot's post is taken (the refusals below are the ban's).
    let post = writes(&bot, &carol).swap_remove(0);
    let answer = write_over_bus(&cluster, &team, agent(&bot, &carol), post).await;
    assert!(answer.is_ok(), "{answer:?}");

    // Banned: whatever reaches the write-service is refused, before anything else it checks.
    ban(&cluster, 0, &team, &bot).await;
    ban(&cluster, 1, &team, &dave).await;
    for (key, owner) in [(&bot, &carol), (&helper, &dave)] {
        for event in writes(key, owner) {
            let kind = event.kind;
            let answer = write_over_bus(&cluster, &team, agent(key, owner), event).await;
            assert_eq!(answer, Err(BANNED_WRITE.to_owned()), "kind {kind}");
        }
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_keys_tokens_and_nip98_requests_stop_working() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let bob = cluster.member(&team).await;
    let channel = open_channel(&cluster, &team).await;
    let token = cluster.token(&team, &bob, &json!({"scopes": ["messages:read", "messages:write"]})).await;
    let query = json!([{"artifact": "current", "#h": [channel]}]);
    let res = cluster.bearer_request(1, &team, Method::POST, "/query", Some(&query), &token).await;
    assert_eq!(res.status(), 200);

    ban(&cluster, 0, &team, &bob).await;
    for g in 0..2 {
        let res = cluster.bearer_request(g, &team, Method::POST, "/query", Some(&query), &token).await;
        assert_eq!(res.status(), 401, "gateway {g}: a banned key's token still reads");
        let bearer = format!("Bearer {token}");
        let headers = [("authorization", bearer.as_str())];
        let upgrade = WsClient::connect_with_headers(cluster.gateways[g], &team.host, &headers).await;
        assert!(upgrade.is_err(), "gateway {g}: a banned key's token opened a socket");
        let res = cluster.tenant_request(g, &team, Method::POST, "/query", Some(&query), &bob).await;
        assert_eq!(res.status(), 403, "gateway {g}: a banned key's NIP-98 still reads");
        let res = cluster.issue_token(g, &team, &bob, &json!({"scopes": ["messages:read"]})).await;
        assert_eq!(res.status(), 403, "gateway {g}: a banned key minted a token");
        let mut ws = WsClient::connect(cluster.gateways[g], &team.host).await.unwrap();
        assert!(!ws.auth(&bob).await.0);
    }
    cluster.stop().await;
}

/// Whether a backend of this database waits for a lock of `kind` (`relation` on
/// `community_audit`, or `advisory`).
async fn waiting(cluster: &Cluster, kind: &str) -> bool {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE NOT l.granted AND l.locktype = $1 \
             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND ($1 <> 'relation' OR l.relation = 'community_audit'::regclass))",
    )
    .bind(kind)
    .fetch_one(&cluster.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_added_while_its_ban_commits_is_refused_never_left_banned_and_a_member() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let bob = Keys::generate();
    // Holding the audit table keeps the ban's transaction open after it recorded the ban.
    let mut holder = cluster.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE community_audit IN EXCLUSIVE MODE").execute(&mut *holder).await.unwrap();
    let added = AtomicBool::new(false);
    let params = json!([bob.public_hex()]);
    let banning = call(&cluster, 0, &team, &team.owner, "banpubkey", &params);
    let adding = async {
        eventually(Duration::from_secs(5), || waiting(&cluster, "relation")).await;
        let body = json!({"pubkey": bob.public_hex(), "role": "member"});
        let res =
            cluster.tenant_request(1, &team, Method::POST, "/api/members", Some(&body), &team.owner).await;
        added.store(true, Ordering::SeqCst);
        res.status().as_u16()
    };
    let releasing = async {
        eventually(Duration::from_secs(5), || async {
            added.load(Ordering::SeqCst) || waiting(&cluster, "advisory").await
        })
        .await;
        holder.commit().await.unwrap();
    };
    let ((ban_status, v), add_status, ()) = tokio::join!(banning, adding, releasing);
    assert_eq!(ban_status, 200, "{v}");
    let member: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM community_members WHERE community_id = $1 AND pubkey = $2)",
    )
    .bind(team.id)
    .bind(bob.public_hex())
    .fetch_one(&cluster.pool)
    .await
    .unwrap();
    assert!(!member, "the key is banned and a member (the add answered {add_status})");
    assert_eq!(add_status, 403);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_who_makes_a_banned_key_the_owner_lifts_its_ban() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let bob = cluster.member(&team).await;
    ban(&cluster, 0, &team, &bob).await;
    let path = format!("/operator/communities/{}", team.id);
    let body = json!({"owner_pubkey": bob.public_hex()});
    let (status, v) = cluster.operator_json(Method::PATCH, &path, Some(&body)).await;
    assert_eq!(status, 200, "{v}");
    // The new owner authenticates and manages: it is not banned and a member at once.
    let mut ws = WsClient::connect(cluster.gateways[1], &team.host).await.unwrap();
    assert_eq!(ws.auth(&bob).await, (true, String::new()));
    let banned = rpc_ok(&cluster, 0, &team, &bob, "listbannedpubkeys", &json!([])).await;
    assert_eq!(banned, json!([]));
    cluster.stop().await;
}
