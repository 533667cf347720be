//! The bounds on NIP-86 calls (issue 37): a per-key rate limit shared by every gateway, answered
//! `429` in the NIP-86 JSON shape, and `BUZZ_NIP_FI_MODE=deny_protected` refusing `POST /` as it
//! refuses `/api/*` and `/query`.

#![allow(clippy::unwrap_used)]

use buzz_core::Keys;
use buzz_tests::nip86::{call, ok as rpc_ok};
use buzz_tests::nip_fi::{self, evidence, fi_socket, Alg};
use buzz_tests::{Cluster, ClusterOptions, Community};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nip86_calls_are_limited_per_key_across_gateways_with_a_json_429() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let other = cluster.community("other.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let per_min = usize::try_from(buzz_gateway::settings::RATE_MANAGE_PER_MIN).unwrap();
    let none = json!([]);

    // The default limit, through both gateways in turn: the calls within it are answered.
    for i in 0..per_min {
        let (status, v) = call(&cluster, i % 2, &team, &team.owner, "supportedmethods", &none).await;
        assert_eq!(status, 200, "call {i}: {v}");
    }
    // Past it, within a few calls (the sliding window's weight of the previous minute, if the
    // loop crossed a minute), the key is refused on either gateway.
    let mut refused = None;
    for i in 0..5 {
        let (status, v) = call(&cluster, i % 2, &team, &team.owner, "supportedmethods", &none).await;
        if status == 429 {
            refused = Some(v);
            break;
        }
    }
    let v = refused.expect("no 429 past the limit");
    let error = v["error"].as_str().unwrap();
    assert!(v["result"].is_null() && error.starts_with("rate-limited:"), "{v}");
    assert!(error.contains(&per_min.to_string()), "{v}");
    // Another key of the community, and the owner of another community, are not concerned.
    rpc_ok(&cluster, 0, &team, &admin, "supportedmethods", &none).await;
    rpc_ok(&cluster, 1, &other, &other.owner, "supportedmethods", &none).await;
    cluster.stop().await;
}

fn deny_protected(s: &mut buzz_fi::FiSettings) {
    nip_fi::open_gate(s);
    s.mode = buzz_fi::Mode::DenyProtected;
}

/// A NIP-86 call by `signer` with FI `evidence` through gateway 0: status and body.
async fn call_with_evidence(
    cluster: &Cluster,
    team: &Community,
    signer: &Keys,
    evidence: &str,
    method: &str,
    params: &Value,
) -> (u16, Value) {
    let body = json!({ "method": method, "params": params }).to_string().into_bytes();
    let url = format!("https://{}/", team.host);
    let res = reqwest::Client::new()
        .post(format!("http://{}/", cluster.gateways[0]))
        .header("host", &team.host)
        .header("content-type", buzz_core::nip86::CONTENT_TYPE)
        .header("authorization", buzz_core::nip98::authorization_header(signer, "POST", &url, &body))
        .header("nostr-federated-identity", evidence)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_protected_refuses_nip86_as_it_refuses_the_members_api() {
    let options = ClusterOptions { gateways: 1, nip_fi: Some(deny_protected), ..ClusterOptions::default() };
    let cluster = Cluster::start_with(options).await;
    let team = cluster.community("fi-deny-nip86.test").await;
    nip_fi::bind(&cluster, &team).await;
    let ev = evidence(Alg::Es256, &team, &team.owner, 600);
    let stranger = Keys::generate();

    // Even with valid evidence for the signer, management is refused outright, changes and reads.
    for (method, params) in [("allowpubkey", json!([stranger.public_hex()])), ("supportedmethods", json!([]))]
    {
        let (status, v) = call_with_evidence(&cluster, &team, &team.owner, &ev, method, &params).await;
        assert_eq!(status, 403, "{method}: {v}");
        assert_eq!(v, json!({"result": null, "error": "restricted: authorization denied"}), "{method}");
    }
    let member: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM community_members WHERE community_id = $1 AND pubkey = $2)",
    )
    .bind(team.id)
    .bind(stranger.public_hex())
    .fetch_one(&cluster.pool)
    .await
    .unwrap();
    assert!(!member, "deny_protected let a NIP-86 call add a member");
    // The relay URL itself still serves sockets (FI-admitted) and NIP-11.
    let mut ws = fi_socket(cluster.gateways[0], &team, &ev).await.unwrap();
    assert_eq!(ws.auth(&team.owner).await, (true, String::new()));
    assert_eq!(cluster.nip11(0, &team.host).await.0, 200);
    cluster.stop().await;
}
