//! NIP-86 `changerelayname`/`changerelaydescription`/`changerelayicon` (the community's own
//! NIP-11 document on its host, on every gateway) and the audit log of every change, read by
//! the operator API.

#![allow(clippy::unwrap_used)]

use buzz_core::Keys;
use buzz_tests::nip86::{call, ok as rpc_ok};
use buzz_tests::Cluster;
use reqwest::Method;
use serde_json::{json, Value};

/// Polls until gateway `g`'s NIP-11 `field` for `host` is `want` (host leases last at most 1 s).
async fn nip11_becomes(cluster: &Cluster, g: usize, host: &str, field: &str, want: &Value) -> Value {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let (status, doc) = cluster.nip11(g, host).await;
        assert_eq!(status, 200);
        if &doc[field] == want {
            return doc;
        }
        assert!(tokio::time::Instant::now() < deadline, "gateway {g} still serves {doc} for {host}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_profile_methods_set_the_hosts_nip11_document_on_every_gateway_and_only_there() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    cluster.community("other.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let member = cluster.member(&team).await;
    let default_name = cluster.nip11(0, "other.test").await.1["name"].clone();

    assert_eq!(rpc_ok(&cluster, 0, &team, &admin, "changerelayname", &json!(["Team"])).await, json!(true));
    rpc_ok(&cluster, 1, &team, &team.owner, "changerelaydescription", &json!(["Our relay"])).await;
    rpc_ok(&cluster, 0, &team, &admin, "changerelayicon", &json!(["https://team.test/i.png"])).await;
    for g in 0..2 {
        let doc = nip11_becomes(&cluster, g, "team.test", "icon", &json!("https://team.test/i.png")).await;
        assert_eq!((&doc["name"], &doc["description"]), (&json!("Team"), &json!("Our relay")), "{doc}");
        assert!(doc["supported_nips"].as_array().unwrap().contains(&json!(86)), "{doc}");
    }
    let other = cluster.nip11(1, "other.test").await.1;
    assert_eq!(other["name"], default_name);
    assert!(other.get("icon").is_none(), "{other}");
    // The operator API reads the same profile.
    let (_, v) = cluster
        .operator_json(Method::GET, &format!("/operator/communities?community_id={}", team.id), None)
        .await;
    assert_eq!(v["name"], "Team", "{v}");

    // A member changes nothing; bad values are refused and change nothing.
    let (status, _) = call(&cluster, 1, &team, &member, "changerelayname", &json!(["Mine"])).await;
    assert_eq!(status, 403);
    for (method, value) in
        [("changerelayname", json!("x".repeat(65))), ("changerelayicon", json!("ftp://x.test/i"))]
    {
        let (status, v) = call(&cluster, 0, &team, &admin, method, &json!([value])).await;
        assert_eq!(status, 400, "{method}: {v}");
    }
    nip11_becomes(&cluster, 1, "team.test", "name", &json!("Team")).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_audited_with_who_when_and_what_and_the_operator_reads_it() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let other = cluster.community("other.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let member = cluster.member(&team).await;
    let bob = Keys::generate();
    let before = buzz_core::unix_now();

    rpc_ok(&cluster, 0, &team, &admin, "allowpubkey", &json!([bob.public_hex(), "hired"])).await;
    rpc_ok(&cluster, 1, &team, &team.owner, "banpubkey", &json!([bob.public_hex(), "spam"])).await;
    rpc_ok(&cluster, 0, &team, &admin, "changerelayname", &json!(["Team"])).await;
    // Reads and refused calls are not changes.
    rpc_ok(&cluster, 1, &team, &admin, "listbannedpubkeys", &json!([])).await;
    let (status, _) = call(&cluster, 1, &team, &member, "changerelayname", &json!(["Mine"])).await;
    assert_eq!(status, 403);
    let (status, _) = call(&cluster, 1, &team, &admin, "banpubkey", &json!([team.owner.public_hex()])).await;
    assert_eq!(status, 403);

    let path = format!("/operator/communities/{}/audit", team.id);
    let (status, v) = cluster.operator_json(Method::GET, &path, None).await;
    assert_eq!(status, 200, "{v}");
    let entries = v["entries"].as_array().unwrap();
    let seen: Vec<(&str, &str)> =
        entries.iter().map(|e| (e["method"].as_str().unwrap(), e["actor"].as_str().unwrap())).collect();
    let (a, o) = (admin.public_hex(), team.owner.public_hex());
    assert_eq!(
        seen,
        vec![("allowpubkey", a.as_str()), ("banpubkey", o.as_str()), ("changerelayname", a.as_str())]
    );
    assert_eq!(entries[1]["params"]["pubkey"], bob.public_hex(), "{v}");
    assert_eq!(entries[1]["params"]["reason"], "spam", "{v}");
    assert_eq!(entries[2]["params"]["name"], "Team", "{v}");
    for e in entries {
        let at = e["at"].as_i64().unwrap();
        assert!(at >= before - 1 && at <= buzz_core::unix_now() + 1, "{e}");
    }
    assert!(v["next"].is_null(), "{v}");

    // Paged; another community's log is its own; only operator keys read it.
    let (_, page) = cluster.operator_json(Method::GET, &format!("{path}?limit=2"), None).await;
    assert_eq!(page["entries"].as_array().unwrap().len(), 2);
    let next = page["next"].as_i64().unwrap();
    let (_, rest) = cluster.operator_json(Method::GET, &format!("{path}?after={next}&limit=2"), None).await;
    assert_eq!(rest["entries"][0]["method"], "changerelayname", "{rest}");
    let (_, theirs) =
        cluster.operator_json(Method::GET, &format!("/operator/communities/{}/audit", other.id), None).await;
    assert_eq!(theirs["entries"], json!([]), "{theirs}");
    let res = cluster.operator_request(Method::GET, &path, None, &team.owner).await;
    assert_eq!(res.status(), 403);
    let (status, _) = cluster.operator_json(Method::GET, &format!("{path}?limit=0"), None).await;
    assert_eq!(status, 400);
    cluster.stop().await;
}
