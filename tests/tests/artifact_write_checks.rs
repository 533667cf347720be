//! NIP-AR write checks "the same way, and at the same point, as for a kind-9 message"
//! (`../shared/spec/NIP-AR.md`, "Access"), and kind 5 aimed at revisions ("Moderation and
//! retention"): a sender who could not post kind 9 in the artifact's channel gets exactly the
//! kind-9 answer, whatever the artifact's state, while resubmitting an accepted event stays an
//! idempotent `OK true` that reveals nothing newer.

#![allow(clippy::unwrap_used)]

use buzz_core::{Event, Keys};
use buzz_tests::client::{message, WsClient};
use buzz_tests::helpers::{channel, ok_plain, tag};
use buzz_tests::{Cluster, Community};
use uuid::Uuid;

const TYPE: &str = "buzz.task";

/// A signed revision (deletions carry no title and empty content).
fn rev(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&str>) -> Event {
    let mut tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", TYPE), tag("op", op)];
    if op != "delete" {
        tags.push(tag("title", "Fix the payment timeout"));
    }
    if let Some(prev) = prev {
        tags.push(tag("prev", prev));
    }
    let content = if op == "delete" { String::new() } else { format!("{{\"n\":\"{}\"}}", Uuid::new_v4()) };
    keys.sign_new(45010, tags, &content)
}

fn admin(keys: &Keys, kind: u32, h: Uuid, extra: Vec<String>) -> Event {
    keys.sign_new(kind, vec![tag("h", h), extra], "")
}

/// Publishes `ev`, which must be refused; the reason.
async fn refusal(c: &mut WsClient, ev: &Event) -> String {
    let (accepted, msg) = c.publish(ev).await;
    assert!(!accepted, "kind {} was accepted", ev.kind);
    msg
}

async fn current(cluster: &Cluster, d: Uuid) -> String {
    sqlx::query_scalar("SELECT current_revision FROM artifacts WHERE d = $1")
        .bind(d)
        .fetch_one(&cluster.pool)
        .await
        .unwrap()
}

struct Setup {
    cluster: Cluster,
    team: Community,
    alice: Keys,
    bob: Keys,
    a: WsClient,
    b: WsClient,
}

async fn setup() -> Setup {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    Setup { cluster, team, alice, bob, a, b }
}

/// An artifact bob creates in `h` and alice then updates: (d, bob's create, alice's update).
async fn edited_by_both(s: &mut Setup, h: Uuid) -> (Uuid, Event, Event) {
    let d = Uuid::new_v4();
    let created = rev(&s.bob, "create", d, h, None);
    ok_plain(&mut s.b, &created).await;
    let updated = rev(&s.alice, "update", d, h, Some(&created.id));
    ok_plain(&mut s.a, &updated).await;
    (d, created, updated)
}

/// Bob's answers to a kind 9 in `h` and to each revision are byte-identical.
async fn same_as_kind_9(b: &mut WsClient, bob: &Keys, h: Uuid, revisions: &[Event]) -> String {
    let kind_9 = refusal(b, &message(bob, h, "hi")).await;
    for r in revisions {
        assert_eq!(refusal(b, r).await, kind_9, "{} answered unlike kind 9", r.tags[4][1]);
    }
    kind_9
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_who_cannot_post_kind_9_gets_the_kind_9_answer_whatever_the_artifacts_state() {
    let mut s = setup().await;
    let (alice, bob) = (s.alice.clone(), s.bob.clone());
    let private = channel(&mut s.a, &alice, "private").await;
    let open = channel(&mut s.a, &alice, "open").await;
    let archived = channel(&mut s.a, &alice, "open").await;
    let elsewhere = channel(&mut s.a, &alice, "open").await;
    ok_plain(&mut s.a, &admin(&alice, 9000, private, tag("p", bob.public_hex()))).await;
    ok_plain(&mut s.a, &admin(&alice, 9000, open, tag("p", bob.public_hex()))).await;
    let (dp, cp, up) = edited_by_both(&mut s, private).await;
    let (dob, cob, uob) = edited_by_both(&mut s, open).await;
    let (da, ca, ua) = edited_by_both(&mut s, archived).await;
    // Bob is removed from the private channel, banned from the open one; one is archived.
    ok_plain(&mut s.a, &admin(&alice, 9001, private, tag("p", bob.public_hex()))).await;
    ok_plain(&mut s.a, &admin(&alice, 9001, open, tag("p", bob.public_hex()))).await;
    ok_plain(&mut s.a, &admin(&alice, 9002, archived, tag("archived", "true"))).await;

    for (h, d, created, updated) in
        [(private, dp, &cp, &up), (open, dob, &cob, &uob), (archived, da, &ca, &ua)]
    {
        // A stale prev (what bob last saw), the current one, an unknown one, an unknown d, a
        // create of the taken d, a deletion: the channel decides before the artifact does.
        let cases = [
            rev(&bob, "update", d, h, Some(&created.id)),
            rev(&bob, "update", d, h, Some(&updated.id)),
            rev(&bob, "update", d, h, Some(&"e".repeat(64))),
            rev(&bob, "update", Uuid::new_v4(), h, Some(&created.id)),
            rev(&bob, "create", d, h, None),
            rev(&bob, "delete", d, h, Some(&created.id)),
            // A move out of it, stale or not, into a channel he can write.
            rev(&bob, "move", d, elsewhere, Some(&created.id)),
            rev(&bob, "move", d, elsewhere, Some(&updated.id)),
        ];
        let answer = same_as_kind_9(&mut s.b, &bob, h, &cases).await;
        assert!(!answer.starts_with("conflict:"), "{answer}");
        assert_eq!(current(&s.cluster, d).await, updated.id);
    }
    // A move into a channel he cannot write answers that channel's kind-9 text, stale or not.
    let (dm, cm, um) = edited_by_both(&mut s, elsewhere).await;
    let into = [rev(&bob, "move", dm, private, Some(&cm.id)), rev(&bob, "move", dm, private, Some(&um.id))];
    same_as_kind_9(&mut s.b, &bob, private, &into).await;
    assert_eq!(current(&s.cluster, dm).await, um.id);
    s.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resubmission_after_losing_access_is_ok_true_and_reveals_nothing_newer_even_after_retention() {
    let mut s = setup().await;
    let (alice, bob) = (s.alice.clone(), s.bob.clone());
    let private = channel(&mut s.a, &alice, "private").await;
    ok_plain(&mut s.a, &admin(&alice, 9000, private, tag("p", bob.public_hex()))).await;
    let (d, created, updated) = edited_by_both(&mut s, private).await;
    let mine = rev(&bob, "update", d, private, Some(&updated.id));
    ok_plain(&mut s.b, &mine).await;
    let newest = rev(&alice, "update", d, private, Some(&mine.id));
    ok_plain(&mut s.a, &newest).await;
    ok_plain(&mut s.a, &admin(&alice, 9001, private, tag("p", bob.public_hex()))).await;
    // The create's event expires by retention (only its accepted id is left).
    sqlx::query("UPDATE communities SET retention_days = 1 WHERE id = $1")
        .bind(s.team.id)
        .execute(&s.cluster.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE events SET accepted_at = now() - interval '2 days' WHERE id = $1")
        .bind(&created.id)
        .execute(&s.cluster.pool)
        .await
        .unwrap();
    // Their successors are as old: no live snapshot capture can hold them (retention.rs).
    sqlx::query("UPDATE artifact_revisions SET accepted_at = accepted_at - interval '2 days'")
        .execute(&s.cluster.pool)
        .await
        .unwrap();
    buzz_write::revision::retention::sweep_retention(&s.cluster.pool, 1000).await.unwrap();
    for resubmitted in [&created, &mine] {
        let (accepted, msg) = s.b.publish(resubmitted).await;
        assert!(accepted, "resubmission refused: {msg}");
        assert_eq!(msg, "duplicate: already have this event");
    }
    assert_eq!(current(&s.cluster, d).await, newest.id);
    s.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kind_5_aimed_at_someone_elses_revision_gets_the_artifact_reason_unless_it_is_unreadable() {
    let mut s = setup().await;
    let (alice, bob) = (s.alice.clone(), s.bob.clone());
    let open = channel(&mut s.a, &alice, "open").await;
    let private = channel(&mut s.a, &alice, "private").await;
    let theirs = rev(&alice, "create", Uuid::new_v4(), open, None);
    ok_plain(&mut s.a, &theirs).await;
    let hidden = rev(&alice, "create", Uuid::new_v4(), private, None);
    ok_plain(&mut s.a, &hidden).await;
    let reason = "invalid: artifact revisions cannot be deleted with kind 5; publish op=delete";
    // Bob reads the open channel: he is told why, as the author would be.
    assert_eq!(refusal(&mut s.b, &bob.sign_new(5, vec![tag("e", &theirs.id)], "")).await, reason);
    assert_eq!(refusal(&mut s.a, &alice.sign_new(5, vec![tag("e", &theirs.id)], "")).await, reason);
    // A redacted revision is still a revision.
    ok_plain(&mut s.a, &admin(&alice, 9005, open, tag("e", &theirs.id))).await;
    assert_eq!(refusal(&mut s.b, &bob.sign_new(5, vec![tag("e", &theirs.id)], "")).await, reason);
    // A revision he cannot read gets the answer any unknown event gets.
    let unknown = refusal(&mut s.b, &bob.sign_new(5, vec![tag("e", "f".repeat(64))], "")).await;
    assert_eq!(unknown, "restricted: can only delete your own events");
    assert_eq!(refusal(&mut s.b, &bob.sign_new(5, vec![tag("e", &hidden.id)], "")).await, unknown);
    s.cluster.stop().await;
}
