//! The world's NIP-86 state and moderation: a community ban, a banned event, kind rules, a
//! blocked address, a moderator's channel ban (9001) and a kind-5 deletion; and the reads that
//! must answer the same after an import (the NIP-86 lists and the operator's audit log).

use buzz_core::Keys;
use buzz_tests::client::{message, WsClient};
use buzz_tests::nip86::ok as rpc;
use buzz_tests::snapshot::{admin, ok, tag};
use buzz_tests::{Cluster, Community};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

/// Moderation in `team` by its owner: `member` is banned from channel `work` (9001), one of
/// `author`'s messages in `general` is deleted by its author (kind 5) and another is banned
/// (NIP-86 `banevent`), a new member is banned from the community, kinds 1 and 7 disallowed and
/// an address blocked.
pub async fn moderate(
    cluster: &Cluster,
    team: &Community,
    (general, work): (Uuid, Uuid),
    (author, member): (&Keys, &Keys),
) {
    let mut o = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    let mut a = WsClient::authed(cluster.gateways[1], &team.host, author).await;
    // Added to the open channel, then removed by its owner: banned from it although it is open.
    ok(&mut o, &admin(&team.owner, 9000, work, vec![tag("p", member.public_hex())])).await;
    ok(&mut o, &admin(&team.owner, 9001, work, vec![tag("p", member.public_hex())])).await;
    let typo = message(author, general, "a typo to delete");
    ok(&mut a, &typo).await;
    ok(&mut a, &author.sign_new(5, vec![tag("e", &typo.id)], "")).await;
    let spam = message(author, general, "buy cheap watches");
    ok(&mut a, &spam).await;
    let owner = &team.owner;
    rpc(cluster, 0, team, owner, "banevent", &json!([spam.id.to_string(), "spam"])).await;
    let troll = cluster.member(team).await;
    rpc(cluster, 1, team, owner, "banpubkey", &json!([troll.public_hex(), "trolling"])).await;
    rpc(cluster, 0, team, owner, "disallowkind", &json!([1])).await;
    rpc(cluster, 1, team, owner, "disallowkind", &json!([7])).await;
    // Not the tests' own address (127.0.0.1): the reads must still reach the host.
    rpc(cluster, 0, team, owner, "blockip", &json!(["2001:db8::1", "abuse"])).await;
}

/// The NIP-86 lists as the owner reads them, and the operator's audit log of `team`.
pub async fn reads(cluster: &Cluster, team: &Community) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for method in
        ["listbannedpubkeys", "listbannedevents", "listallowedkinds", "listdisallowedkinds", "listblockedips"]
    {
        let got = rpc(cluster, 1, team, &team.owner, method, &json!([])).await;
        out.push((format!("NIP-86 {method}"), got));
    }
    let path = format!("/operator/communities/{}/audit", team.id);
    let (status, body) = cluster.operator_json(Method::GET, &path, None).await;
    out.push((format!("GET {path}"), json!([status, body])));
    out
}
