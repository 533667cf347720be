//! NIP-AR reads end to end (`../shared/spec/NIP-AR.md`, "Current state and queries", and the read
//! side of "Access" and "Moving and deleting"): the `current` and `history` artifact queries over
//! WebSocket REQ/COUNT and signed `POST /query`, the advertised limits and the execution budget
//! (generic filters on revisions: `artifact_generic_reads.rs`).

#![allow(clippy::unwrap_used)]

use buzz_core::{Event, Keys};
use buzz_tests::client::WsClient;
use buzz_tests::helpers::{channel, ok, tag};
use buzz_tests::{Cluster, ClusterOptions, Community};
use serde_json::{json, Value};
use uuid::Uuid;

const TASK: &str = "buzz.task";

/// A signed revision of type `ty` with the envelope and `extra` client tags.
fn rev(
    keys: &Keys,
    op: &str,
    d: Uuid,
    h: Uuid,
    prev: Option<&Event>,
    ty: &str,
    extra: &[Vec<String>],
) -> Event {
    let mut tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", ty), tag("op", op)];
    if op != "delete" {
        tags.push(tag("title", "Fix the payment timeout"));
    }
    if let Some(prev) = prev {
        tags.push(tag("prev", &prev.id));
    }
    if op != "delete" {
        tags.extend(extra.iter().cloned());
    }
    let content =
        if op == "delete" { String::new() } else { json!({"version": 1, "n": Uuid::new_v4()}).to_string() };
    keys.sign_new(45010, tags, &content)
}

/// Creates an artifact of `ty` in `h` with `extra` tags; returns its d and revision.
async fn task(c: &mut WsClient, keys: &Keys, h: Uuid, ty: &str, extra: &[Vec<String>]) -> (Uuid, Event) {
    let d = Uuid::new_v4();
    let e = rev(keys, "create", d, h, None, ty, extra);
    ok(c, &e).await;
    (d, e)
}

fn admin(keys: &Keys, kind: u32, h: Uuid, extra: Vec<String>) -> Event {
    keys.sign_new(kind, vec![tag("h", h), extra], "")
}

/// REQ that must end with EOSE; the events' ids.
async fn ids(c: &mut WsClient, filter: Value) -> Vec<String> {
    let r = c.req(&Uuid::new_v4().simple().to_string(), &[filter]).await;
    assert!(r.closed.is_none(), "closed: {:?}", r.closed);
    r.events.into_iter().map(|e| e.id.to_string()).collect()
}

async fn count(c: &mut WsClient, filter: Value) -> u64 {
    c.count(&Uuid::new_v4().simple().to_string(), &[filter]).await.unwrap()
}

/// REQ that must be CLOSED; the reason.
async fn closed(c: &mut WsClient, filters: &[Value]) -> String {
    let r = c.req(&Uuid::new_v4().simple().to_string(), filters).await;
    r.closed.unwrap_or_else(|| panic!("not closed: {filters:?}"))
}

fn idv(events: &[&Event]) -> Vec<String> {
    events.iter().map(|e| e.id.to_string()).collect()
}

/// `POST /query[?count=1]` signed by `keys` through gateway `g`: (status, body).
async fn post_query(cluster: &Cluster, c: &Community, path: &str, body: &Value, keys: &Keys) -> (u16, Value) {
    let res = cluster.tenant_request(0, c, reqwest::Method::POST, path, Some(body), keys).await;
    (res.status().as_u16(), res.json().await.unwrap())
}

fn body_ids(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect()
}

struct Setup {
    cluster: Cluster,
    team: Community,
    alice: Keys,
    bob: Keys,
    /// An open channel created by alice.
    open: Uuid,
    a: WsClient,
    b: WsClient,
}

async fn setup_with(opts: ClusterOptions) -> Setup {
    let cluster = Cluster::start_with(opts).await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let open = channel(&mut a, &alice, "open").await;
    Setup { cluster, team, alice, bob, open, a, b }
}

async fn setup() -> Setup {
    setup_with(ClusterOptions::default()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_queries_return_exactly_the_current_members_and_older_revisions_never_match() {
    let Setup { cluster, alice, mut a, open, .. } = setup().await;
    let (pa, pb) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
    let other = channel(&mut a, &alice, "open").await;
    let (_, t1) = task(&mut a, &alice, open, TASK, &[tag("project", &pa)]).await;
    let (d2, t2) = task(&mut a, &alice, open, TASK, &[tag("project", &pa)]).await;
    let (_, t3) = task(&mut a, &alice, other, TASK, &[tag("project", &pb)]).await;
    // Same project, other type; and a tag whose FIRST value is not the project.
    let (_, note) = task(&mut a, &alice, open, "buzz.note", &[tag("project", &pa)]).await;
    let second = vec!["project".to_owned(), Uuid::new_v4().to_string(), pa.clone()];
    task(&mut a, &alice, open, TASK, &[second]).await;
    // Task 2 moves from project A to project B and to the other channel.
    let t2b = rev(&alice, "update", d2, open, Some(&t2), TASK, &[tag("project", &pb)]);
    ok(&mut a, &t2b).await;
    let t2c = rev(&alice, "move", d2, other, Some(&t2b), TASK, &[tag("project", &pb)]);
    ok(&mut a, &t2c).await;

    let q = |project: &str| json!({"artifact": "current", "#type": [TASK], "#project": [project]});
    assert_eq!(ids(&mut a, q(&pa)).await, idv(&[&t1]));
    // Newest change first (`artifacts.updated_at DESC, d`).
    assert_eq!(ids(&mut a, q(&pb)).await, idv(&[&t2c, &t3]));
    assert_eq!(count(&mut a, q(&pa)).await, 1);
    assert_eq!(count(&mut a, q(&pb)).await, 2);
    // OR within a name, AND across names.
    let both = json!({"artifact": "current", "#project": [pa, pb]});
    assert_eq!(ids(&mut a, both.clone()).await, idv(&[&t2c, &note, &t3, &t1]));
    assert_eq!(count(&mut a, both).await, 4);
    let only_notes = json!({"artifact": "current", "#type": ["buzz.note"], "#project": [pa]});
    assert_eq!(ids(&mut a, only_notes).await, idv(&[&note]));
    // `#d` is a tag like any other; the current revision only.
    assert_eq!(ids(&mut a, json!({"artifact": "current", "#d": [d2.to_string()]})).await, idv(&[&t2c]));
    cluster.stop().await;
}

/// `#ar`, `#d` and `#prev` have no current-tag rows (`buzz_store::current_tags`):
/// they are answered from the artifact's `d` and current revision, alone, together, beside row
/// predicates (as the lead or not), in counts, and the current revision only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelope_predicates_without_rows_match_exactly_the_current_revisions_that_carry_them() {
    let Setup { cluster, alice, mut a, open, .. } = setup().await;
    let project = Uuid::new_v4().to_string();
    let (d1, t1) = task(&mut a, &alice, open, TASK, &[tag("project", &project)]).await;
    let (d2, t2) = task(&mut a, &alice, open, "buzz.note", &[tag("project", &project)]).await;
    let t1b = rev(&alice, "update", d1, open, Some(&t1), TASK, &[tag("project", &project)]);
    ok(&mut a, &t1b).await;
    let t1c = rev(&alice, "update", d1, open, Some(&t1b), TASK, &[tag("project", &project)]);
    ok(&mut a, &t1c).await;
    let cur = |extra: Value| {
        let mut q = json!({"artifact": "current"});
        q.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        q
    };
    let (s1, s2) = (d1.to_string(), d2.to_string());
    let cases = [
        (json!({"#d": [s1]}), vec![&t1c]),
        (json!({"#d": [s1, s2]}), vec![&t1c, &t2]),
        (json!({"#d": [s1], "#type": [TASK]}), vec![&t1c]),
        (json!({"#d": [s2], "#type": [TASK]}), vec![]),
        (json!({"#d": [s1, s2], "#project": [project], "#type": ["buzz.note"]}), vec![&t2]),
        // Only the lowercase hyphenated form is a d value, as in the stored tag.
        (json!({"#d": [s1.to_uppercase()]}), vec![]),
        (json!({"#d": ["not-a-uuid", s2]}), vec![&t2]),
        (json!({"#ar": ["1"], "#project": [project]}), vec![&t1c, &t2]),
        (json!({"#ar": ["1", "2"], "#d": [s1]}), vec![&t1c]),
        (json!({"#ar": ["2"]}), vec![]),
        (json!({"#ar": ["2"], "#project": [project]}), vec![]),
        // The current revision's prev only: t1b is named by the current revision, t1 no longer.
        (json!({"#prev": [t1b.id]}), vec![&t1c]),
        (json!({"#prev": [t1.id]}), vec![]),
        (json!({"#prev": [t1.id, t1b.id], "#type": [TASK], "#d": [s1]}), vec![&t1c]),
        (json!({"#prev": [t1b.id], "#type": ["buzz.note"]}), vec![]),
        (json!({"#prev": [t2.id]}), vec![]),
        // The current revision's op only: t1c is an update, t2 still its create.
        (json!({"#op": ["update"]}), vec![&t1c]),
        (json!({"#op": ["create"]}), vec![&t2]),
        (json!({"#op": ["create", "update"], "#project": [project]}), vec![&t1c, &t2]),
        (json!({"#op": ["create"], "#d": [s1]}), vec![]),
        (json!({"#op": ["delete", "move"]}), vec![]),
        (json!({"#op": ["update"], "#type": [TASK], "#prev": [t1b.id]}), vec![&t1c]),
    ];
    for (extra, want) in cases {
        let q = cur(extra);
        assert_eq!(ids(&mut a, q.clone()).await, idv(&want), "{q}");
        assert_eq!(count(&mut a, q.clone()).await, want.len() as u64, "{q}");
    }
    // A deleted artifact matches none of them.
    let gone = rev(&alice, "delete", d2, open, Some(&t2), "buzz.note", &[]);
    ok(&mut a, &gone).await;
    assert!(ids(&mut a, cur(json!({"#d": [s2]}))).await.is_empty());
    assert!(ids(&mut a, cur(json!({"#prev": [t2.id]}))).await.is_empty());
    assert_eq!(ids(&mut a, cur(json!({"#ar": ["1"]}))).await, idv(&[&t1c]));
    assert!(ids(&mut a, cur(json!({"#op": ["delete"]}))).await.is_empty());
    // No rows for them were stored: none in the current-tag index, and no tag rows for these
    // revisions at all (their tags are `d`, `h` and multi-character names, `buzz_store::tag_rows`).
    let rows: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM artifact_current_tags WHERE d = ANY($1) AND name IN ('ar', 'd', 'op', 'prev', 'type')",
    )
    .bind(vec![d1, d2])
    .fetch_one(&cluster.pool)
    .await
    .unwrap();
    assert_eq!(rows, 0);
    let revision_rows: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT t.name FROM event_tags t JOIN events e ON e.community_id = t.community_id AND e.id = t.event_id \
         WHERE e.kind = 45010 AND t.event_id = ANY($1) ORDER BY 1",
    )
    .bind(vec![t1.id.clone(), t1b.id.clone(), t1c.id.clone(), t2.id.clone(), gone.id.clone()])
    .fetch_all(&cluster.pool)
    .await
    .unwrap();
    assert!(revision_rows.is_empty(), "{revision_rows:?}");
    cluster.stop().await;
}

/// A live `current` subscription on a derived predicate is told when the artifact leaves it: the
/// replaced revision's `op` and `prev` (and its `ar`, `d` and `type`) travel in `replaced_tags`
/// like its rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_current_subscription_on_prev_or_d_is_told_when_the_artifact_leaves_it() {
    let Setup { cluster, alice, mut a, mut b, open, .. } = setup().await;
    let secret = channel(&mut a, &alice, "private").await;
    let (d, t1) = task(&mut a, &alice, open, TASK, &[]).await;
    assert!(b.req("o", &[json!({"artifact": "current", "#op": ["create"]})]).await.closed.is_none());
    let t2 = rev(&alice, "update", d, open, Some(&t1), TASK, &[]);
    ok(&mut a, &t2).await;
    // The update replaces the create: the artifact leaves `#op: [create]`, and Bob hears of it.
    assert_eq!(next(&mut b, "o").await.id, t2.id);
    assert!(b.req("p", &[json!({"artifact": "current", "#prev": [t1.id]})]).await.closed.is_none());
    // The next revision names t2, so the artifact leaves `#prev: [t1]`: Bob hears of it.
    let t3 = rev(&alice, "update", d, open, Some(&t2), TASK, &[]);
    ok(&mut a, &t3).await;
    assert_eq!(next(&mut b, "p").await.id, t3.id);
    // `#d` with a row predicate the next revision drops: told too (ar and d replaced as well).
    let q = json!({"artifact": "current", "#d": [d.to_string()], "#ar": ["1"], "#status": ["open"]});
    assert!(b.req("d", &[q]).await.closed.is_none());
    // `#type` (a column of the rows, no row of its own) with a row predicate: the same.
    let q = json!({"artifact": "current", "#type": [TASK], "#status": ["open"]});
    assert!(b.req("t", &[q]).await.closed.is_none());
    let t4 = rev(&alice, "update", d, open, Some(&t3), TASK, &[tag("status", "open")]);
    ok(&mut a, &t4).await;
    assert_eq!(next(&mut b, "d").await.id, t4.id);
    assert_eq!(next(&mut b, "t").await.id, t4.id);
    let t5 = rev(&alice, "update", d, open, Some(&t4), TASK, &[tag("status", "done")]);
    ok(&mut a, &t5).await;
    assert_eq!(next(&mut b, "d").await.id, t5.id);
    assert_eq!(next(&mut b, "t").await.id, t5.id);
    // A move to a channel Bob cannot read: the removal the move leaves in the source reaches him.
    let away = rev(&alice, "move", d, secret, Some(&t5), TASK, &[]);
    assert!(b.req("m", &[json!({"artifact": "current", "#d": [d.to_string()]})]).await.closed.is_none());
    ok(&mut a, &away).await;
    assert_eq!(next(&mut b, "m").await.kind, 45011);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_and_retired_artifacts_are_omitted_from_current_queries_and_counts_until_restored() {
    let Setup { cluster, alice, mut a, open, .. } = setup().await;
    let (_, kept) = task(&mut a, &alice, open, TASK, &[]).await;
    let (dd, gone) = task(&mut a, &alice, open, TASK, &[]).await;
    let (_, retired) = task(&mut a, &alice, open, TASK, &[]).await;
    let del = rev(&alice, "delete", dd, open, Some(&gone), TASK, &[]);
    ok(&mut a, &del).await;
    ok(&mut a, &admin(&alice, 9005, open, tag("e", &retired.id))).await;
    let q = json!({"artifact": "current", "#type": [TASK]});
    assert_eq!(ids(&mut a, q.clone()).await, idv(&[&kept]));
    assert_eq!(count(&mut a, q).await, 1);
    // The deletion stays readable in history, the retired revision does not.
    let h = json!({"artifact": "history", "#d": [dd.to_string()]});
    assert_eq!(ids(&mut a, h).await, idv(&[&gone, &del]));
    // A restore brings the artifact back under the restoring revision's tags, and only those.
    let project = Uuid::new_v4().to_string();
    let back = rev(&alice, "restore", dd, open, Some(&del), TASK, &[tag("project", &project)]);
    ok(&mut a, &back).await;
    let q = json!({"artifact": "current", "#type": [TASK]});
    assert_eq!(ids(&mut a, q.clone()).await, idv(&[&back, &kept]));
    assert_eq!(count(&mut a, q).await, 2);
    assert_eq!(ids(&mut a, json!({"artifact": "current", "#project": [project]})).await, idv(&[&back]));
    // Deleting it again takes it out of every tag it had.
    let again = rev(&alice, "delete", dd, open, Some(&back), TASK, &[]);
    ok(&mut a, &again).await;
    assert!(ids(&mut a, json!({"artifact": "current", "#project": [project]})).await.is_empty());
    assert_eq!(count(&mut a, json!({"artifact": "current", "#d": [dd.to_string()]})).await, 0);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_current_revision_leaves_current_queries_and_counts() {
    let Setup { cluster, alice, mut a, open, .. } = setup().await;
    let ttl = Uuid::new_v4();
    let create = alice.sign_new(
        9007,
        vec![tag("h", ttl), tag("name", "ephemeral"), tag("visibility", "open"), tag("ttl", 2)],
        "",
    );
    ok(&mut a, &create).await;
    let project = Uuid::new_v4().to_string();
    let (_, kept) = task(&mut a, &alice, open, TASK, &[tag("project", &project)]).await;
    let (_, brief) = task(&mut a, &alice, ttl, TASK, &[tag("project", &project)]).await;
    let q = json!({"artifact": "current", "#project": [project]});
    assert_eq!(ids(&mut a, q.clone()).await, idv(&[&brief, &kept]));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(6);
    while ids(&mut a, q.clone()).await.len() == 2 {
        assert!(tokio::time::Instant::now() < deadline, "an expired revision is still current");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(ids(&mut a, q.clone()).await, idv(&[&kept]));
    assert_eq!(count(&mut a, q).await, 1);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_who_loses_access_to_a_channel_stops_seeing_its_artifacts_while_pages_stay_exact() {
    let Setup { cluster, team, alice, bob, mut a, mut b, open } = setup().await;
    let private = channel(&mut a, &alice, "private").await;
    ok(&mut a, &admin(&alice, 9000, private, tag("p", bob.public_hex()))).await;
    let mut in_open = Vec::new();
    let mut in_private = Vec::new();
    for i in 0..6 {
        let h = if i % 2 == 0 { open } else { private };
        let (d, e) = task(&mut a, &alice, h, TASK, &[]).await;
        if i % 2 == 0 {
            in_open.push((d, e))
        } else {
            in_private.push((d, e))
        }
    }
    let q = |limit: u32, offset: u32| json!({"artifact": "current", "#type": [TASK], "limit": limit, "offset": offset});
    let all = ids(&mut b, q(100, 0)).await;
    assert_eq!(all.len(), 6);
    for offset in [0u32, 4, 2] {
        let from = usize::try_from(offset).unwrap();
        assert_eq!(ids(&mut b, q(2, offset)).await, all[from..from + 2].to_vec());
    }
    assert_eq!(count(&mut b, json!({"artifact": "current", "#type": [TASK]})).await, 6);
    let (pd, pe) = in_private[0].clone();
    let history = json!({"artifact": "history", "#d": [pd.to_string()]});
    assert_eq!(ids(&mut b, history.clone()).await, idv(&[&pe]));

    // Removed from the private channel (a moderator's 9001 is a ban).
    ok(&mut a, &admin(&alice, 9001, private, tag("p", bob.public_hex()))).await;
    let visible: Vec<String> =
        all.iter().filter(|id| in_open.iter().any(|(_, e)| &e.id == *id)).cloned().collect();
    assert_eq!(visible.len(), 3);
    assert_eq!(ids(&mut b, q(100, 0)).await, visible);
    assert_eq!(ids(&mut b, q(2, 0)).await, visible[..2].to_vec());
    assert_eq!(ids(&mut b, q(2, 2)).await, visible[2..].to_vec());
    assert!(ids(&mut b, q(2, 4)).await.is_empty());
    assert_eq!(count(&mut b, json!({"artifact": "current", "#type": [TASK]})).await, 3);
    assert!(ids(&mut b, history.clone()).await.is_empty());
    assert_eq!(count(&mut b, history.clone()).await, 0);
    // Over HTTP too; alice still sees everything.
    let (status, body) = post_query(&cluster, &team, "/query", &json!([q(100, 0)]), &bob).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body_ids(&body), visible);
    let (_, n) = post_query(&cluster, &team, "/query?count=1", &json!([q(100, 0)]), &bob).await;
    assert_eq!(n, json!({"count": 3}));
    assert_eq!(ids(&mut a, q(100, 0)).await, all);

    // A private channel that becomes open is readable again by community members (9002)...
    ok(&mut a, &admin(&alice, 9002, private, tag("visibility", "open"))).await;
    assert_eq!(ids(&mut b, q(100, 0)).await.len(), 3, "a ban outlasts a visibility change");
    let carol = cluster.member(&team).await;
    let mut c = WsClient::authed(cluster.gateways[1], &team.host, &carol).await;
    assert_eq!(ids(&mut c, q(100, 0)).await, all);
    // ...and making it private again (9002) hides it from carol at once.
    ok(&mut a, &admin(&alice, 9002, private, tag("visibility", "private"))).await;
    assert_eq!(ids(&mut c, q(100, 0)).await, visible);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_shows_each_revision_under_its_own_channels_access_across_a_move() {
    let Setup { cluster, team, alice, bob, mut a, mut b, open: destination } = setup().await;
    let source = channel(&mut a, &alice, "private").await;
    let d = Uuid::new_v4();
    let created = rev(&alice, "create", d, source, None, TASK, &[]);
    ok(&mut a, &created).await;
    let edited = rev(&alice, "update", d, source, Some(&created), TASK, &[]);
    ok(&mut a, &edited).await;
    let moved = rev(&alice, "move", d, destination, Some(&edited), TASK, &[]);
    ok(&mut a, &moved).await;
    let next = rev(&bob, "update", d, destination, Some(&moved), TASK, &[]);
    ok(&mut b, &next).await;
    let last = rev(&bob, "update", d, destination, Some(&next), TASK, &[]);
    ok(&mut b, &last).await;
    // A redacted revision is withheld from history (and stays accepted).
    ok(&mut a, &admin(&alice, 9005, destination, tag("e", &next.id))).await;

    let h = json!({"artifact": "history", "#d": [d.to_string()]});
    assert_eq!(ids(&mut a, h.clone()).await, idv(&[&created, &edited, &moved, &last]));
    assert_eq!(count(&mut a, h.clone()).await, 4);
    // Bob reads the destination only: the move never shows him the source's revisions.
    assert_eq!(ids(&mut b, h.clone()).await, idv(&[&moved, &last]));
    assert_eq!(count(&mut b, h.clone()).await, 2);
    let page = json!({"artifact": "history", "#d": [d.to_string()], "limit": 1, "offset": 1});
    assert_eq!(ids(&mut b, page).await, idv(&[&last]));
    let (status, body) = post_query(&cluster, &team, "/query", &json!([h]), &bob).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body_ids(&body), idv(&[&moved, &last]));
    // The destination loads current state without the earlier revisions.
    let cur = json!({"artifact": "current", "#d": [d.to_string()]});
    assert_eq!(ids(&mut b, cur).await, idv(&[&last]));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifact_subscription_receives_matching_revisions_live_and_nothing_else() {
    let Setup { cluster, alice, mut a, mut b, open, .. } = setup().await;
    let project = Uuid::new_v4().to_string();
    let q = json!({"artifact": "current", "#project": [project]});
    assert!(ids(&mut b, q.clone()).await.is_empty());
    let r = b.req("live", &[q]).await;
    assert!(r.closed.is_none());
    let chat = alice.sign_new(9, vec![tag("h", open), tag("project", &project)], "not an artifact");
    ok(&mut a, &chat).await;
    let (_, t) = task(&mut a, &alice, open, TASK, &[tag("project", &project)]).await;
    let got = b.next_event("live", std::time::Duration::from_secs(5)).await;
    assert_eq!(got.map(|e| e.id), Some(t.id));
    cluster.stop().await;
}

/// The next live event of `sub`, within 5 s.
async fn next(c: &mut WsClient, sub: &str) -> Event {
    c.next_event(sub, std::time::Duration::from_secs(5)).await.expect("a live event")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_current_subscription_is_told_when_an_artifact_leaves_its_results() {
    let Setup { cluster, team, alice, mut a, mut b, open, .. } = setup().await;
    let secret = channel(&mut a, &alice, "private").await;
    let carol = cluster.member(&team).await;
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, &carol).await;
    let (pa, pb, pc) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
    assert!(b.req("a", &[json!({"artifact": "current", "#project": [pa]})]).await.closed.is_none());
    assert!(c.req("c", &[json!({"artifact": "current", "#project": [pc]})]).await.closed.is_none());

    // An update that moves a task from project A to B reaches A's subscriber: it no longer matches.
    let (d1, t1) = task(&mut a, &alice, open, TASK, &[tag("project", &pa)]).await;
    assert_eq!(next(&mut b, "a").await.id, t1.id);
    let t1b = rev(&alice, "update", d1, open, Some(&t1), TASK, &[tag("project", &pb)]);
    ok(&mut a, &t1b).await;
    assert_eq!(next(&mut b, "a").await.id, t1b.id);
    // A deletion (envelope tags only) reaches it too.
    let (d2, t2) = task(&mut a, &alice, open, TASK, &[tag("project", &pa)]).await;
    assert_eq!(next(&mut b, "a").await.id, t2.id);
    let gone = rev(&alice, "delete", d2, open, Some(&t2), TASK, &[]);
    ok(&mut a, &gone).await;
    assert_eq!(next(&mut b, "a").await.id, gone.id);
    // A move into a channel Bob cannot read: he gets the relay-signed removal, not the arrival.
    let (d3, t3) = task(&mut a, &alice, open, TASK, &[tag("project", &pa)]).await;
    assert_eq!(next(&mut b, "a").await.id, t3.id);
    let away = rev(&alice, "move", d3, secret, Some(&t3), TASK, &[tag("project", &pa)]);
    ok(&mut a, &away).await;
    let removal = next(&mut b, "a").await;
    assert_eq!(removal.kind, 45011);
    assert_eq!(removal.pubkey, cluster.relay.public_hex());
    assert_eq!(removal.tags, vec![tag("d", d3), tag("h", open), tag("e", &t3.id)]);
    assert!(b.next_event("a", std::time::Duration::from_millis(300)).await.is_none(), "the arrival leaked");
    // A subscriber whose predicates never matched these artifacts heard nothing of them.
    assert!(c.next_event("c", std::time::Duration::from_millis(300)).await.is_none());
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_current_subscription_follows_access_changes_at_the_next_delivery() {
    let Setup { cluster, alice, bob, mut a, mut b, open, .. } = setup().await;
    let private = channel(&mut a, &alice, "private").await;
    ok(&mut a, &admin(&alice, 9000, private, tag("p", bob.public_hex()))).await;
    let project = Uuid::new_v4().to_string();
    assert!(b.req("live", &[json!({"artifact": "current", "#project": [project]})]).await.closed.is_none());
    let (_, first) = task(&mut a, &alice, private, TASK, &[tag("project", &project)]).await;
    assert_eq!(next(&mut b, "live").await.id, first.id);
    // Bob is removed from the private channel: its next revision does not reach him, the open
    // channel's still do, on the same subscription.
    ok(&mut a, &admin(&alice, 9001, private, tag("p", bob.public_hex()))).await;
    task(&mut a, &alice, private, TASK, &[tag("project", &project)]).await;
    let (_, public) = task(&mut a, &alice, open, TASK, &[tag("project", &project)]).await;
    assert_eq!(next(&mut b, "live").await.id, public.id);
    assert!(b.next_event("live", std::time::Duration::from_millis(300)).await.is_none());
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_limit_is_enforced_with_an_explicit_error() {
    let Setup { cluster, team, bob, mut b, .. } = setup().await;
    let res = reqwest::Client::new()
        .get(format!("http://{}/", cluster.gateways[0]))
        .header("host", &team.host)
        .header("accept", "application/nostr+json")
        .send()
        .await
        .unwrap();
    let doc: Value = res.json().await.unwrap();
    let l = &doc["artifacts"];
    assert_eq!(l["revision_kind"], 45010);
    assert_eq!(l["removal_kind"], 45011);
    assert!(doc["supported_extensions"].as_array().unwrap().contains(&json!("nip-ar")));
    let n = |k: &str| usize::try_from(l[k].as_u64().unwrap_or_else(|| panic!("{k} advertised"))).unwrap();
    let d = buzz_core::ArtifactLimits::default();
    assert_eq!(n("max_tag_name_bytes"), d.max_tag_name_bytes);
    assert_eq!(n("max_tag_value_bytes"), d.max_tag_value_bytes);
    assert_eq!(n("max_total_tag_bytes"), d.max_total_tag_bytes);
    assert_eq!(n("max_predicates"), d.max_predicates);
    assert_eq!(n("max_values_per_predicate"), d.max_values_per_predicate);
    assert_eq!(n("max_limit"), d.max_limit as usize);
    assert_eq!(n("max_offset"), d.max_offset as usize);
    assert_eq!(n("execution_budget_ms") as u64, d.execution_budget_ms);

    let cur = |extra: Value| {
        let mut f = json!({"artifact": "current"});
        for (k, v) in extra.as_object().unwrap() {
            f[k] = v.clone();
        }
        f
    };
    let name = |len: usize| format!("#{}", "n".repeat(len));
    let many_names: serde_json::Map<String, Value> =
        (0..=d.max_predicates).map(|i| (format!("#p{i}"), json!(["x"]))).collect();
    let at_names: serde_json::Map<String, Value> =
        (0..d.max_predicates).map(|i| (format!("#p{i}"), json!(["x"]))).collect();
    let big = "v".repeat(1000);
    let over_total: Vec<String> = (0..=d.max_total_tag_bytes / 1000).map(|_| big.clone()).collect();
    let cases: Vec<(Value, &str)> = vec![
        (cur(json!({ name(d.max_tag_name_bytes + 1): ["x"] })), "invalid:"),
        (cur(json!({"#t": ["v".repeat(d.max_tag_value_bytes + 1)]})), "invalid:"),
        (cur(json!({"#t": over_total})), "invalid: tag predicates longer than"),
        (cur(Value::Object(many_names)), "invalid: too many tag predicates"),
        (cur(json!({"#t": vec!["x"; d.max_values_per_predicate + 1]})), "invalid: too many values"),
        (cur(json!({"limit": d.max_limit + 1})), "invalid: limit above"),
        (cur(json!({"offset": d.max_offset + 1})), "invalid: offset above"),
        (json!({"artifact": "latest"}), "unsupported:"),
        (json!({"artifact": "history"}), "invalid: an artifact history query needs #d"),
        (json!({"artifact": "history", "#d": ["not-a-uuid"]}), "invalid:"),
        (json!({"artifact": "history", "#d": [Uuid::new_v4()], "#type": [TASK]}), "unsupported:"),
        (cur(json!({"kinds": [45010]})), "unsupported:"),
        (json!({"offset": 1}), "unsupported: offset needs an artifact query"),
        (json!({"#project": ["x"]}), "unsupported: multi-character tag filters need an artifact query"),
    ];
    for (filter, want) in &cases {
        let reason = closed(&mut b, std::slice::from_ref(filter)).await;
        assert!(reason.starts_with(want), "{filter}: {reason:?} does not start with {want:?}");
        // Over HTTP: 400 with the same prefix (generic filters are refused by POST /query as such).
        let prefix = &want[..=want.find(':').unwrap()];
        let (status, body) = post_query(&cluster, &team, "/query", &json!([filter]), &bob).await;
        assert_eq!(status, 400, "{filter}: {body}");
        assert!(body["error"].as_str().unwrap().starts_with(prefix), "{filter}: {body}");
    }
    // At every limit: accepted.
    let at = [
        cur(Value::Object(at_names)),
        cur(
            json!({"#t": vec!["x"; d.max_values_per_predicate], "limit": d.max_limit, "offset": d.max_offset}),
        ),
        cur(json!({ name(d.max_tag_name_bytes): ["v".repeat(d.max_tag_value_bytes)] })),
    ];
    for filter in at {
        assert!(ids(&mut b, filter.clone()).await.is_empty(), "{filter}");
        assert_eq!(count(&mut b, filter).await, 0);
    }
    // An artifact query is the only filter of its request.
    let two = [json!({"artifact": "current"}), json!({"kinds": [9]})];
    assert!(closed(&mut b, &two).await.starts_with("unsupported:"));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_over_its_execution_budget_is_an_explicit_error_never_a_short_page() {
    let Setup { cluster, team, alice, bob, mut a, mut b, open } =
        setup_with(ClusterOptions { statement_timeout_ms: 1, ..ClusterOptions::default() }).await;
    task(&mut a, &alice, open, TASK, &[]).await;
    // 60k current artifacts with their tag rows, seeded directly: no plan reads that in 1 ms.
    let key = "seed";
    sqlx::query(
        "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
         SELECT $1, encode(sha256(($3 || g)::bytea), 'hex'), $4, 45010, 1700000000, $2, '{}' \
         FROM generate_series(1, 60000) g",
    )
    .bind(team.id)
    .bind(open)
    .bind(key)
    .bind(alice.public_hex())
    .execute(&cluster.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO artifacts (community_id, d, type, current_revision, home_channel) \
         SELECT $1, gen_random_uuid(), 'buzz.task', encode(sha256(($3 || g)::bytea), 'hex'), $2 \
         FROM generate_series(1, 60000) g",
    )
    .bind(team.id)
    .bind(open)
    .bind(key)
    .execute(&cluster.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
         SELECT $1, encode(sha256(($2 || g)::bytea), 'hex'), 'type', sha256('buzz.task'::bytea), 1700000000 \
         FROM generate_series(1, 60000) g",
    )
    .bind(team.id)
    .bind(key)
    .execute(&cluster.pool)
    .await
    .unwrap();
    cluster.index_seeded_artifacts(team.id).await;
    sqlx::query("ANALYZE").execute(&cluster.pool).await.unwrap();
    let q = json!({"artifact": "current", "#type": [TASK], "offset": 10000});
    let reason = closed(&mut b, std::slice::from_ref(&q)).await;
    assert_eq!(reason, "error: query exceeded its execution budget");
    let counted = b.count("n", &[json!({"artifact": "current", "#type": [TASK]})]).await;
    assert_eq!(counted, Err("error: query exceeded its execution budget".to_owned()));
    let (status, body) = post_query(&cluster, &team, "/query", &json!([q]), &bob).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"], "error: query exceeded its execution budget");
    assert_eq!(body["code"], "timeout");
    cluster.stop().await;
}

/// Standard base64 (for a forged NIP-98 header).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_query_answers_one_artifact_filter_and_refuses_bad_input() {
    let Setup { cluster, team, alice, bob, mut a, open, .. } = setup().await;
    let (d, t) = task(&mut a, &alice, open, TASK, &[tag("project", "p1")]).await;
    let q = json!([{"artifact": "current", "#project": ["p1"]}]);
    let (status, body) = post_query(&cluster, &team, "/query", &q, &bob).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body_ids(&body), idv(&[&t]));
    let served: Event = serde_json::from_value(body[0].clone()).unwrap();
    assert_eq!(served, t);
    let (status, body) = post_query(&cluster, &team, "/query?count=1", &q, &bob).await;
    assert_eq!((status, body), (200, json!({"count": 1})));
    let h = json!([{"artifact": "history", "#d": [d.to_string()]}]);
    assert_eq!(body_ids(&post_query(&cluster, &team, "/query", &h, &bob).await.1), idv(&[&t]));

    let bad: Vec<(Value, &str)> = vec![
        (json!({"artifact": "current"}), "invalid:"),
        (json!([]), "invalid:"),
        (json!([{"artifact": "current"}, {"artifact": "current"}]), "invalid:"),
        (json!(["x"]), "invalid:"),
        (json!([{"kinds": [9]}]), "unsupported:"),
        // Snapshot actions go to the snapshot-service (tests/tests/snapshot.rs); a bad one is its 400.
        (json!([{"artifact": "snapshot", "action": "rewind"}]), "snapshot_invalid"),
    ];
    for (body, want) in bad {
        let (status, v) = post_query(&cluster, &team, "/query", &body, &bob).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert!(v["error"].as_str().unwrap().starts_with(want), "{body}: {v}");
    }
    let (status, _) = post_query(&cluster, &team, "/query?limit=1", &q, &bob).await;
    assert_eq!(status, 400);

    // Unsigned, forged signature, signed for another body: 401.
    let url = format!("http://{}/query", cluster.gateways[0]);
    let send = |auth: Option<String>| {
        let mut req = reqwest::Client::new().post(&url).header("host", &team.host).body(q.to_string());
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        req.send()
    };
    assert_eq!(send(None).await.unwrap().status(), 401);
    let signed = format!("https://{}/query", team.host);
    let other = buzz_core::nip98::authorization_header(&bob, "POST", &signed, b"[]");
    assert_eq!(send(Some(other)).await.unwrap().status(), 401);
    let payload: String =
        buzz_store::tag_value_hash(&q.to_string()).iter().map(|b| format!("{b:02x}")).collect();
    let mut forged =
        bob.sign_new(27235, vec![tag("u", &signed), tag("method", "POST"), tag("payload", payload)], "");
    forged.sig = format!("{}{}", if forged.sig.starts_with('0') { "1" } else { "0" }, &forged.sig[1..]);
    let header = format!("Nostr {}", base64(forged.to_json().as_bytes()));
    assert_eq!(send(Some(header)).await.unwrap().status(), 401);
    // A key that is not a community member.
    let (status, v) = post_query(&cluster, &team, "/query", &q, &Keys::generate()).await;
    assert_eq!(status, 403, "{v}");
    cluster.stop().await;
}

/// The plans behind current-state queries, checked with `EXPLAIN (ANALYZE)` on a corpus seeded by
/// SQL (20 000 artifacts in 100 channels, a quarter readable): tagged queries choose their page
/// inside `artifact_current_tags` (readable channels filtered in the index) and read events only
/// for the page; `#type` is matched on the lead row itself (no probe of another row), and alone it
/// walks the anchor rows by type (`artifact_current_tags_by_type`); an untagged one walks the
/// anchor rows by time (`artifact_current_tags_live_by_time`); none scans a whole table. Each
/// page also equals the one computed by brute force from `artifacts`, `channels` and `event_tags`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_state_plans_use_the_current_tag_index_and_read_events_for_the_page_only() {
    let cluster = Cluster::start().await;
    let team = cluster.community("plans.test").await;
    let reader = cluster.member(&team).await;
    let key = reader.public_hex();
    let projects = buzz_tests::seed::artifact_corpus(&cluster, team.id, &key, 20_000, 100).await;
    let querier = buzz_query::Querier {
        pool: cluster.pool.clone(),
        limits: buzz_core::Limits::default(),
        statement_timeout_ms: 5_000,
        control: None,
    };
    let r = buzz_query::sql::Reader { community: team.id, pubkey: &key, channel_ids: None };
    let hash = buzz_store::tag_value_hash;
    // (filter, the index its walk uses, whether it probes a second row of each candidate)
    let cases = [
        (
            json!({"artifact": "current", "#type": [TASK], "#project": [projects[7]]}),
            "artifact_current_tags_by_",
            false,
        ),
        (json!({"artifact": "current", "#type": [TASK]}), "artifact_current_tags_by_type", false),
        (
            json!({"artifact": "current", "#type": [TASK, "buzz.note"]}),
            "artifact_current_tags_by_type",
            false,
        ),
        // Repeated values are one value: each artifact once, the page full.
        (
            json!({"artifact": "current", "#type": [TASK, TASK, "buzz.note"]}),
            "artifact_current_tags_by_type",
            false,
        ),
        (
            json!({"artifact": "current", "#project": [projects[1], projects[2]]}),
            "artifact_current_tags_by_",
            false,
        ),
        // The one single-valued predicate leads the statement (the type's walk, the projects
        // probed); the planner may start from the projects instead, which are the more selective
        // here: either way one side probes the other's rows.
        (
            json!({"artifact": "current", "#type": ["buzz.note"], "#project": [projects[1], projects[2]]}),
            "artifact_current_tags_",
            true,
        ),
        (json!({"artifact": "current"}), "artifact_current_tags_live_by_time", false),
    ];
    for (filter, index, probes_rows) in cases {
        let f: buzz_core::Filter = serde_json::from_value(filter.clone()).unwrap();
        let (mut tx, readable) = querier.open(&r, 5_000, true).await.unwrap();
        let form = buzz_query::artifacts::Form::Current;
        let plan: Vec<String> = buzz_query::artifacts::explain_select(form, &r, &readable, &f, 100, 0)
            .build_query_scalar()
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        let page: Vec<(String, String)> = buzz_query::artifacts::select(form, &r, &readable, &f, 100, 0)
            .build_query_as()
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let plan = plan.join("\n");
        assert!(plan.contains(index), "{filter}: expected {index}\n{plan}");
        assert!(!plan.contains("Seq Scan"), "{filter}: a sequential scan\n{plan}");
        // `#type` is the lead row's own column: only another row predicate probes a second row.
        assert_eq!(plan.contains("artifact_current_tags_pkey"), probes_rows, "{filter}: probes\n{plan}");
        // Events are probed by primary key, at most once per row of the page.
        let probes: u64 = plan
            .lines()
            .filter(|l| l.contains("on events e"))
            .map(|l| {
                assert!(l.contains("events_pkey"), "{filter}: events read otherwise than by key\n{plan}");
                l.rsplit("loops=").next().unwrap().trim_end_matches(')').parse::<u64>().unwrap()
            })
            .sum();
        assert!((1..=100).contains(&probes), "{filter}: {probes} event probes\n{plan}");

        // Brute force: the current revisions in open channels that carry every predicate.
        let mut sql = String::from(
            "SELECT a.current_revision FROM artifacts a JOIN channels c ON c.community_id = a.community_id \
             AND c.id = a.home_channel WHERE a.community_id = $1 AND c.visibility = 'open'",
        );
        let mut binds: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
        for (i, (name, values)) in f.tags.iter().enumerate() {
            sql += &format!(
                " AND EXISTS (SELECT 1 FROM event_tags t WHERE t.community_id = $1 AND t.event_id = a.current_revision \
                 AND t.name = ${} AND t.value_hash = ANY(${}))",
                2 * i + 2,
                2 * i + 3
            );
            binds.push((name.clone(), values.iter().map(|v| hash(v)).collect()));
        }
        sql += " ORDER BY a.updated_at DESC, a.d LIMIT 100";
        let mut q = sqlx::query_scalar::<_, String>(&sql).bind(team.id);
        for (name, hashes) in binds {
            q = q.bind(name).bind(hashes);
        }
        let expected: Vec<String> = q.fetch_all(&cluster.pool).await.unwrap();
        let got: Vec<String> = page.into_iter().map(|(id, _)| id).collect();
        assert!(!expected.is_empty(), "{filter}: the corpus has no match");
        assert_eq!(got, expected, "{filter}");
    }
    cluster.stop().await;
}
