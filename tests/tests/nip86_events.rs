//! NIP-86 `banevent`, `unbanevent`/`allowevent`, `listbannedevents` through two gateways: a ban
//! is a redaction under the kind-9005 rules (withheld from every reader; a banned artifact
//! revision never changes which revision is current), and nothing is revealed about events in
//! channels the caller cannot read; a redaction by anyone entitled stands on its own, and lifting
//! a ban never undoes someone else's redaction (issue 37 item 9).

#![allow(clippy::unwrap_used)]

use buzz_core::{Event, Keys};
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::helpers::{ok, tag, tagged};
use buzz_tests::nip86::{call, ok as rpc_ok};
use buzz_tests::Cluster;
use serde_json::json;
use uuid::Uuid;

async fn served(ws: &mut WsClient, id: &str) -> bool {
    !ws.req("r", &[json!({"ids": [id]})]).await.events.is_empty()
}

fn revision(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&str>) -> Event {
    let mut tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", "buzz.task"), tag("op", op)];
    tags.push(tag("title", "Fix the payment timeout"));
    if let Some(prev) = prev {
        tags.push(tag("prev", prev));
    }
    keys.sign_new(45010, tags, &json!({"version": 1, "n": Uuid::new_v4()}).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_event_is_withheld_listed_and_unbanned_and_nothing_unreadable_is_revealed() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let bob = cluster.member(&team).await;
    let (open, private) = (Uuid::new_v4(), Uuid::new_v4());
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    ok(&mut owner, &create_channel(&team.owner, open, "general", "open")).await;
    ok(&mut owner, &create_channel(&team.owner, private, "secret", "private")).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let spam = message(&bob, open, "buy now");
    ok(&mut b, &spam).await;
    let secret = message(&team.owner, private, "owner only");
    ok(&mut owner, &secret).await;

    // A member may not; an admin bans bob's message through the other gateway.
    let (status, _) = call(&cluster, 0, &team, &bob, "banevent", &json!([spam.id])).await;
    assert_eq!(status, 403);
    assert_eq!(rpc_ok(&cluster, 1, &team, &admin, "banevent", &json!([spam.id, "spam"])).await, json!(true));
    assert!(!served(&mut b, &spam.id).await && !served(&mut owner, &spam.id).await);
    let listed = rpc_ok(&cluster, 0, &team, &admin, "listbannedevents", &json!([])).await;
    assert_eq!(listed, json!([{"id": spam.id, "reason": "spam"}]));

    // The admin is no member of the private channel: its event answers exactly as one that
    // does not exist, and the owner's ban there is not listed to the admin.
    let missing = "0".repeat(64);
    let (s1, v1) = call(&cluster, 1, &team, &admin, "banevent", &json!([secret.id])).await;
    let (s2, v2) = call(&cluster, 1, &team, &admin, "banevent", &json!([missing])).await;
    assert_eq!((s1, &v1), (s2, &v2), "an unreadable event answers as a missing one");
    assert!(v1["error"].is_string() && s1 != 200, "{v1}");
    rpc_ok(&cluster, 0, &team, &team.owner, "banevent", &json!([secret.id, "leak"])).await;
    let mine = rpc_ok(&cluster, 0, &team, &team.owner, "listbannedevents", &json!([])).await;
    assert_eq!(mine.as_array().unwrap().len(), 2, "{mine}");
    let theirs = rpc_ok(&cluster, 1, &team, &admin, "listbannedevents", &json!([])).await;
    assert_eq!(theirs, json!([{"id": spam.id, "reason": "spam"}]));
    let (s3, v3) = call(&cluster, 1, &team, &admin, "unbanevent", &json!([secret.id])).await;
    assert_eq!((s3, &v3), (s2, &v2), "{v3}");

    // Unban (and allowevent, its synonym) lifts the redaction; twice is no such event.
    rpc_ok(&cluster, 1, &team, &admin, "unbanevent", &json!([spam.id])).await;
    assert!(served(&mut b, &spam.id).await);
    let (status, _) = call(&cluster, 0, &team, &admin, "allowevent", &json!([spam.id])).await;
    assert_ne!(status, 200);
    rpc_ok(&cluster, 0, &team, &admin, "banevent", &json!([spam.id])).await;
    rpc_ok(&cluster, 0, &team, &admin, "allowevent", &json!([spam.id])).await;
    assert!(served(&mut owner, &spam.id).await);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_artifact_revision_is_withheld_and_never_changes_which_revision_is_current() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let bob = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    ok(&mut owner, &create_channel(&team.owner, channel, "work", "open")).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let d = Uuid::new_v4();
    let c = revision(&bob, "create", d, channel, None);
    ok(&mut b, &c).await;
    let u1 = revision(&bob, "update", d, channel, Some(&c.id));
    ok(&mut b, &u1).await;
    let current = || async {
        let v: String = sqlx::query_scalar("SELECT current_revision FROM artifacts WHERE d = $1")
            .bind(d)
            .fetch_one(&cluster.pool)
            .await
            .unwrap();
        v
    };

    // An earlier revision: withheld, the current one unchanged and still served.
    rpc_ok(&cluster, 1, &team, &team.owner, "banevent", &json!([c.id])).await;
    assert!(!served(&mut b, &c.id).await);
    assert_eq!(current().await, u1.id);
    assert!(served(&mut b, &u1.id).await);
    // The current revision: withheld and still current (its id stays a valid prev); the
    // artifact is retired, and unbanning it is refused with what to do instead.
    rpc_ok(&cluster, 0, &team, &team.owner, "banevent", &json!([u1.id, "wrong"])).await;
    assert!(!served(&mut owner, &u1.id).await);
    assert_eq!(current().await, u1.id);
    let (status, v) = call(&cluster, 1, &team, &team.owner, "unbanevent", &json!([u1.id])).await;
    assert_eq!(status, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("prev"), "{v}");
    ok(&mut b, &revision(&bob, "update", d, channel, Some(&u1.id))).await;
    // The earlier revision's ban lifts: history serves it again.
    rpc_ok(&cluster, 1, &team, &team.owner, "unbanevent", &json!([c.id])).await;
    assert!(served(&mut b, &c.id).await);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redaction_stands_on_its_own_and_lifting_a_ban_never_undoes_another_redaction() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let bob = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    ok(&mut owner, &create_channel(&team.owner, channel, "general", "open")).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let (first, second) = (message(&bob, channel, "one"), message(&bob, channel, "two"));
    ok(&mut b, &first).await;
    ok(&mut b, &second).await;
    let redact = |id: &str| tagged(&team.owner, 9005, channel, vec![tag("e", id)]);

    // An admin's ban, then the owner's own kind-9005 redaction of the same event: both stand,
    // and the admin lifting its ban leaves the owner's redaction in place.
    rpc_ok(&cluster, 1, &team, &admin, "banevent", &json!([first.id, "spam"])).await;
    ok(&mut owner, &redact(&first.id)).await;
    rpc_ok(&cluster, 1, &team, &admin, "unbanevent", &json!([first.id])).await;
    assert!(!served(&mut b, &first.id).await && !served(&mut owner, &first.id).await);
    assert_eq!(rpc_ok(&cluster, 0, &team, &admin, "listbannedevents", &json!([])).await, json!([]));

    // The other order: the owner redacts first, an admin's ban of it is recorded on its own, and
    // lifting it leaves the owner's redaction in place.
    ok(&mut owner, &redact(&second.id)).await;
    rpc_ok(&cluster, 0, &team, &admin, "banevent", &json!([second.id, "also"])).await;
    let listed = rpc_ok(&cluster, 1, &team, &admin, "listbannedevents", &json!([])).await;
    assert_eq!(listed, json!([{"id": second.id, "reason": "also"}]));
    rpc_ok(&cluster, 0, &team, &admin, "allowevent", &json!([second.id])).await;
    assert!(!served(&mut b, &second.id).await && !served(&mut owner, &second.id).await);

    // A redaction still needs the right to remove: a member redacts no one else's message.
    let carol = cluster.member(&team).await;
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, &carol).await;
    let (accepted, why) = c.publish(&tagged(&carol, 9005, channel, vec![tag("e", &first.id)])).await;
    assert!(!accepted && why.starts_with("restricted:"), "{why}");
    cluster.stop().await;
}
