//! NIP-86 community management end to end, through two gateways: who may call (401 without
//! valid NIP-98 with `payload`, 403 for members and strangers alike, JSON-RPC-shaped bodies),
//! `supportedmethods`, bans (membership removed, re-adding refused, the key's sockets closed on
//! every gateway), allow/unallow under the members rules. The profile methods and the audit log
//! are in `nip86_profile.rs`.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_core::Keys;
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::helpers::ok;
use buzz_tests::nip86::{call, call_host, keys_of, ok as rpc_ok, Auth};
use buzz_tests::Cluster;
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

const RESTRICTED: &str = "only the community's owner and admins manage it";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_nip98_signed_owners_and_admins_call_and_every_answer_is_json_rpc_shaped() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let other = cluster.community("other.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let member = cluster.member(&team).await;
    let stranger = Keys::generate();
    let host = team.host.as_str();
    let none = json!([]);

    // 401: no header, a header without `payload`, a bearer token (NIP-98 only), a bad signature URL.
    let token = cluster.token(&team, &team.owner, &json!({"scopes": ["messages:read"]})).await;
    for auth in [Auth::None, Auth::NoPayload(&team.owner), Auth::Bearer(&token)] {
        let (status, v) = call_host(&cluster, 0, host, &auth, "supportedmethods", &none).await;
        assert_eq!(status, 401, "{v}");
        assert!(v["result"].is_null() && v["error"].is_string(), "{v}");
    }
    let (status, v) =
        call_host(&cluster, 1, "other.test", &Auth::Signed(&team.owner), "supportedmethods", &none).await;
    assert_eq!(status, 403, "the owner of one community manages no other: {v}");
    assert_eq!(v["error"], RESTRICTED);

    // 403 for a member and for a key that is no member, in the same words (non-disclosure).
    for key in [&member, &stranger, &other.owner] {
        for g in 0..2 {
            let (status, v) = call(&cluster, g, &team, key, "listallowedpubkeys", &none).await;
            assert_eq!((status, &v["error"], &v["result"]), (403, &json!(RESTRICTED), &Value::Null), "{v}");
        }
    }

    // The owner and an admin, through either gateway.
    for (g, key) in [(0, &team.owner), (1, &admin)] {
        let methods = rpc_ok(&cluster, g, &team, key, "supportedmethods", &none).await;
        assert_eq!(methods, json!(buzz_core::nip86::SUPPORTED), "{methods}");
        assert_eq!(rpc_ok(&cluster, g, &team, key, "listeventsneedingmoderation", &none).await, json!([]));
    }

    // A bad call is 400 with its reason; a method left out of supportedmethods is unsupported.
    for (method, params, says) in [
        ("banpubkey", json!(["ABC"]), "64 lowercase hex"),
        ("banpubkey", json!([]), "params"),
        ("grantadmin", json!([member.public_hex(), ["banpubkey"]]), "unsupported method"),
        ("changerelayname", json!([""]), "1 to 64"),
    ] {
        let (status, v) = call(&cluster, 1, &team, &admin, method, &params).await;
        assert_eq!(status, 400, "{method} {params}: {v}");
        assert!(v["error"].as_str().unwrap().contains(says), "{method}: {v}");
    }
    // Another content type on POST / is not a NIP-86 call.
    let res = reqwest::Client::new()
        .request(Method::POST, format!("http://{}/", cluster.gateways[0]))
        .header("host", host)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 415);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_removes_membership_refuses_re_adding_and_closes_the_keys_sockets_on_every_gateway() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let bob = cluster.member(&team).await;
    let carol = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut owner_ws = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    ok(&mut owner_ws, &create_channel(&team.owner, channel, "general", "open")).await;
    let mut bob0 = WsClient::authed(cluster.gateways[0], &team.host, &bob).await;
    let mut bob1 = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let mut carol1 = WsClient::authed(cluster.gateways[1], &team.host, &carol).await;
    ok(&mut bob1, &message(&bob, channel, "before the ban")).await;

    let result = rpc_ok(&cluster, 1, &team, &admin, "banpubkey", &json!([bob.public_hex(), "spam"])).await;
    assert_eq!(result, json!(true));
    for (g, ws) in [(0, &mut bob0), (1, &mut bob1)] {
        let (got, code) = ws.drain_until_closed(Duration::from_secs(5)).await.expect("socket closed");
        assert_eq!(code, Some(1008), "gateway {g}: {got:?}");
        assert!(got.iter().any(|m| m[0] == "NOTICE" && m[1].as_str().unwrap().contains("banned")), "{got:?}");
    }
    // Carol's socket is untouched.
    ok(&mut carol1, &message(&carol, channel, "still here")).await;

    let banned = rpc_ok(&cluster, 0, &team, &team.owner, "listbannedpubkeys", &json!([])).await;
    assert_eq!(banned, json!([{"pubkey": bob.public_hex(), "reason": "spam"}]));
    let members = keys_of(&rpc_ok(&cluster, 0, &team, &admin, "listallowedpubkeys", &json!([])).await);
    assert!(!members.contains(&bob.public_hex()) && members.contains(&carol.public_hex()), "{members:?}");

    // Re-adding is refused everywhere until unbanned; a new socket of the key cannot write.
    let (status, v) = call(&cluster, 1, &team, &team.owner, "allowpubkey", &json!([bob.public_hex()])).await;
    assert_eq!((status, &v["error"]), (403, &json!("that key is banned from this community")), "{v}");
    let body = json!({"pubkey": bob.public_hex(), "role": "member"});
    let res = cluster.tenant_request(0, &team, Method::POST, "/api/members", Some(&body), &team.owner).await;
    assert_eq!(res.status(), 403);
    let mut again = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    let _ = again.auth(&bob).await;
    let (accepted, why) = again.publish(&message(&bob, channel, "back?")).await;
    assert!(!accepted, "a banned key wrote: {why}");

    // Owners and admins follow the members rules: an admin bans no admin, nobody bans the owner.
    let (status, _) = call(&cluster, 0, &team, &admin, "banpubkey", &json!([team.owner.public_hex()])).await;
    assert_eq!(status, 403);
    let (status, _) =
        call(&cluster, 0, &team, &team.owner, "banpubkey", &json!([team.owner.public_hex()])).await;
    assert_eq!(status, 403);
    // A key that never was a member can be banned ahead.
    let stranger = Keys::generate();
    rpc_ok(&cluster, 0, &team, &admin, "banpubkey", &json!([stranger.public_hex()])).await;

    // Unban lifts the refusal (membership is not given back by itself).
    rpc_ok(&cluster, 0, &team, &admin, "unbanpubkey", &json!([bob.public_hex()])).await;
    let (status, v) = call(&cluster, 1, &team, &admin, "unbanpubkey", &json!([bob.public_hex()])).await;
    assert_eq!((status, &v["error"]), (404, &json!("that key is not banned")), "{v}");
    let banned = keys_of(&rpc_ok(&cluster, 1, &team, &admin, "listbannedpubkeys", &json!([])).await);
    assert_eq!(banned, vec![stranger.public_hex()]);
    rpc_ok(&cluster, 1, &team, &admin, "allowpubkey", &json!([bob.public_hex()])).await;
    let mut back = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    ok(&mut back, &message(&bob, channel, "back")).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_and_unallow_change_membership_under_the_members_rules() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let other_admin = Keys::generate();
    cluster.add_member(&team, &other_admin, "admin").await;
    let dave = Keys::generate();
    let channel = Uuid::new_v4();
    let mut owner_ws = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    ok(&mut owner_ws, &create_channel(&team.owner, channel, "general", "open")).await;

    assert_eq!(
        rpc_ok(&cluster, 0, &team, &admin, "allowpubkey", &json!([dave.public_hex(), "new hire"])).await,
        json!(true)
    );
    let members = rpc_ok(&cluster, 1, &team, &team.owner, "listallowedpubkeys", &json!([])).await;
    assert!(
        members.as_array().unwrap().contains(&json!({"pubkey": dave.public_hex(), "role": "member"})),
        "{members}"
    );
    let mut dave1 = WsClient::authed(cluster.gateways[1], &team.host, &dave).await;
    assert!(dave1.req("live", &[json!({"kinds": [9], "#h": [channel.to_string()]})]).await.closed.is_none());
    ok(&mut dave1, &message(&dave, channel, "hello")).await;

    // Allowing a key that has a role keeps the role (an admin is not made a member).
    rpc_ok(&cluster, 0, &team, &admin, "allowpubkey", &json!([other_admin.public_hex()])).await;
    let members = rpc_ok(&cluster, 0, &team, &admin, "listallowedpubkeys", &json!([])).await;
    assert!(members
        .as_array()
        .unwrap()
        .contains(&json!({"pubkey": other_admin.public_hex(), "role": "admin"})));

    // Unallow removes the membership: the key's subscriptions close on the other gateway at once.
    rpc_ok(&cluster, 0, &team, &admin, "unallowpubkey", &json!([dave.public_hex()])).await;
    let closed = dave1.wait_for(|m| m[0] == "CLOSED").await.unwrap();
    assert!(closed[2].as_str().unwrap().starts_with("restricted:"), "{closed}");
    let (accepted, why) = dave1.publish(&message(&dave, channel, "gone?")).await;
    assert!(!accepted, "a removed key wrote: {why}");
    let (status, v) = call(&cluster, 1, &team, &admin, "unallowpubkey", &json!([dave.public_hex()])).await;
    assert_eq!((status, &v["error"]), (404, &json!("not a member")), "{v}");
    // An admin removes no admin and nobody the owner.
    let (status, _) =
        call(&cluster, 1, &team, &admin, "unallowpubkey", &json!([other_admin.public_hex()])).await;
    assert_eq!(status, 403);
    let (status, _) =
        call(&cluster, 1, &team, &other_admin, "unallowpubkey", &json!([team.owner.public_hex()])).await;
    assert_eq!(status, 403);
    // The owner removes an admin, who then may call no more.
    rpc_ok(&cluster, 1, &team, &team.owner, "unallowpubkey", &json!([other_admin.public_hex()])).await;
    let (status, _) = call(&cluster, 0, &team, &other_admin, "supportedmethods", &json!([])).await;
    assert_eq!(status, 403);
    cluster.stop().await;
}
