//! Group commit of NIP-AR revisions (`buzz_write::revision`): a batch answers every revision
//! exactly as the single-revision path does (what it does not decide itself is written alone after
//! its commit), keeps the current-tag index equal to the current revisions' tags, and a revision
//! whose storage fails never takes its batch-mates down.

#![allow(clippy::unwrap_used)]

use buzz_bus::{Actor, BusError};
use buzz_core::{CommunityId, Event, Keys};
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::helpers::tag;
use buzz_tests::{Cluster, Community};
use buzz_write::error::{WriteError, WriteResult};
use buzz_write::write_revisions;
use buzz_write::Pools;
use buzz_write::{Accepted, Relay};
use serde_json::json;
use uuid::Uuid;

fn rev(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&str>, extra: &[Vec<String>]) -> Event {
    let mut tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", "buzz.task"), tag("op", op)];
    if op != "delete" {
        tags.push(tag("title", "A task"));
    }
    if let Some(prev) = prev {
        tags.push(tag("prev", prev));
    }
    tags.extend(extra.iter().cloned());
    let content = if op == "delete" { String::new() } else { json!({"n": Uuid::new_v4()}).to_string() };
    keys.sign_new(45010, tags, &content)
}

struct Setup {
    cluster: Cluster,
    community: Community,
    member: Keys,
    open: Uuid,
    other: Uuid,
    private: Uuid,
    archived: Uuid,
}

async fn setup() -> Setup {
    let cluster = Cluster::start().await;
    let community = cluster.community("revbatch.test").await;
    let member = cluster.member(&community).await;
    let mut ws = WsClient::authed(cluster.gateways[0], &community.host, &community.owner).await;
    let (open, other, private, archived) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    for (id, visibility) in [(open, "open"), (other, "open"), (private, "private"), (archived, "open")] {
        let (ok, msg) = ws.publish(&create_channel(&community.owner, id, "c", visibility)).await;
        assert!(ok, "{msg}");
    }
    let archive = community.owner.sign_new(9002, vec![tag("h", archived), tag("archived", "true")], "");
    let (ok, msg) = ws.publish(&archive).await;
    assert!(ok, "{msg}");
    Setup { cluster, community, member, open, other, private, archived }
}

/// `(duplicate, message)` of an accepted revision, or the answer to a refused one.
fn answer(outcome: &WriteResult<Accepted>) -> Result<(bool, String), BusError> {
    match outcome {
        Ok(a) => Ok((a.ok.duplicate, a.ok.message.clone())),
        Err(WriteError::Refused(b)) => Err(b.clone()),
        Err(other) => panic!("unexpected storage failure: {other}"),
    }
}

/// Every current-tag row, and what it must be: the tags of every served current revision, each
/// row with the revision's type.
async fn current_tags_match_current_revisions(pool: &sqlx::PgPool, community: CommunityId) {
    type Row = (Uuid, String, Vec<u8>, Uuid, String, String);
    let index: Vec<Row> = sqlx::query_as(
        "SELECT d, name, value_hash, home_channel, revision, type FROM artifact_current_tags \
         WHERE community_id = $1 ORDER BY d, name, value_hash",
    )
    .bind(community)
    .fetch_all(pool)
    .await
    .unwrap();
    // The truth is the current revision's own tags, read from its stored JSON (the envelope tags
    // of a revision have no `event_tags` rows).
    let expected: Vec<Row> = sqlx::query_as(
        "SELECT DISTINCT a.d, t.tag->>0, sha256(convert_to(t.tag->>1, 'UTF8')), a.home_channel, a.current_revision, \
                (SELECT y.tag->>1 FROM jsonb_array_elements(e.raw::jsonb -> 'tags') AS y(tag) WHERE y.tag->>0 = 'type') \
         FROM artifacts a \
         JOIN events e ON e.community_id = a.community_id AND e.id = a.current_revision \
         CROSS JOIN LATERAL jsonb_array_elements(e.raw::jsonb -> 'tags') AS t(tag) \
         WHERE a.community_id = $1 AND NOT a.deleted AND e.redacted_at IS NULL AND e.deleted_at IS NULL \
           AND jsonb_array_length(t.tag) >= 2 AND octet_length(t.tag->>0) BETWEEN 1 AND 64 \
           AND NOT (t.tag->>0 = ANY($2)) \
         ORDER BY 1, 2, 3",
    )
    .bind(community)
    .bind(buzz_store::current_tags::DERIVED.to_vec())
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(!expected.is_empty());
    assert_eq!(index, expected, "the current-tag index holds exactly the current revisions' tags");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_batch_answers_every_revision_as_the_single_revision_path_does() {
    let s = setup().await;
    let pool = &s.cluster.pool;
    let pools = Pools { batch: pool.clone(), single: pool.clone() };
    let relay_keys = Keys::generate();
    let relay = Relay { keys: &relay_keys };
    let community = s.community.id;
    let m = &s.member;
    let member = Actor::session(m.pubkey());
    let outsider_keys = Keys::generate();
    let outsider = Actor::session(outsider_keys.pubkey());
    let owner = Actor::session(s.community.owner.pubkey());
    let read_only = Actor { scopes: vec![buzz_bus::Scope::MessagesRead], ..member.clone() };
    let alone = |e: &Event| buzz_write::write_event(pool, community, &member, e.clone(), &relay);

    // State written alone first: an anchor, and artifacts to update, move, delete and restore.
    let anchor = message(m, s.open, "anchor");
    assert!(alone(&anchor).await.is_ok());
    let [a, b, c, dd, e, f, g, h, i] = [(); 9].map(|()| Uuid::new_v4());
    let [j, k, l, n, o] = [(); 5].map(|()| Uuid::new_v4());
    let mut created = Vec::new();
    for d in [a, b, c, dd, e, f, g, h, i, j, k, l, n, o] {
        let extra = match d {
            _ if d == a => vec![tag("status", "open")],
            _ if d == l => vec![tag("root", &anchor.id)],
            _ => vec![],
        };
        let ev = rev(m, "create", d, s.open, None, &extra);
        assert!(alone(&ev).await.is_ok_and(|r| !r.ok.duplicate));
        created.push(ev);
    }
    let b1 = rev(m, "update", b, s.open, Some(&created[1].id), &[]);
    assert!(alone(&b1).await.is_ok());
    let g_deleted = rev(m, "delete", g, s.open, Some(&created[6].id), &[]);
    assert!(alone(&g_deleted).await.is_ok());
    let j_deleted = rev(m, "delete", j, s.open, Some(&created[9].id), &[]);
    assert!(alone(&j_deleted).await.is_ok());

    let new = Uuid::new_v4();
    let twice = rev(m, "create", Uuid::new_v4(), s.open, None, &[]);
    let a1 = rev(
        m,
        "update",
        a,
        s.open,
        Some(&created[0].id),
        &[tag("status", "done"), tag("p", s.community.owner.public_hex())],
    );
    let a1_rival = rev(m, "update", a, s.open, Some(&created[0].id), &[tag("status", "rival")]);
    // A type change (the envelope's `type` is replaced: the same tags with another value).
    let mut retyped = rev(m, "update", i, s.open, Some(&created[8].id), &[]).tags;
    retyped.iter_mut().filter(|t| t[0] == "type").for_each(|t| t[1] = "buzz.other".to_owned());
    let ii_retyped = m.sign_new(45010, retyped, "{}");
    let batch: Vec<(CommunityId, Actor, Event)> = vec![
        /* 0 */
        (community, member.clone(), rev(m, "create", new, s.open, None, &[tag("status", "open")])),
        /* 1 */ (community, member.clone(), a1.clone()),
        /* 2 */ (community, member.clone(), a1_rival.clone()),
        /* 3 */ (community, member.clone(), b1.clone()),
        /* 4 */ (community, member.clone(), rev(m, "update", c, s.open, Some(&"ab".repeat(32)), &[])),
        /* 5 */
        (community, member.clone(), rev(m, "update", Uuid::new_v4(), s.open, Some(&created[0].id), &[])),
        /* 6 */ (community, member.clone(), rev(m, "update", h, s.other, Some(&created[7].id), &[])),
        /* 7 */ (community, member.clone(), rev(m, "move", e, s.other, Some(&created[4].id), &[])),
        /* 8 */ (community, member.clone(), rev(m, "delete", f, s.open, Some(&created[5].id), &[])),
        /* 9 */ (community, member.clone(), rev(m, "restore", g, s.open, Some(&g_deleted.id), &[])),
        /* 10 */ (community, member.clone(), rev(m, "create", c, s.open, None, &[])),
        /* 11 */ (community, member.clone(), twice.clone()),
        /* 12 */ (community, member.clone(), twice.clone()),
        /* 13 */
        (community, outsider.clone(), rev(&outsider_keys, "create", Uuid::new_v4(), s.open, None, &[])),
        /* 14 */ (community, member.clone(), rev(m, "create", Uuid::new_v4(), s.private, None, &[])),
        /* 15 */ (community, member.clone(), m.sign_new(45010, vec![tag("ar", "1")], "")),
        /* 16 */
        (
            community,
            member.clone(),
            rev(m, "create", Uuid::new_v4(), s.open, None, &[tag("root", "cd".repeat(32))]),
        ),
        /* 17 */
        (
            community,
            member.clone(),
            rev(m, "create", Uuid::new_v4(), s.open, None, &[tag("root", &anchor.id)]),
        ),
        /* 18 */
        (
            community,
            member.clone(),
            rev(m, "update", c, s.open, Some(&created[2].id), &[tag("root", "ef".repeat(32))]),
        ),
        /* 19 */
        (
            community,
            member.clone(),
            rev(m, "update", dd, s.open, Some(&created[3].id), &[tag("root", &anchor.id)]),
        ),
        /* 20 */
        (CommunityId::new_v4(), member.clone(), rev(m, "create", Uuid::new_v4(), s.open, None, &[])),
        /* 21 */ (community, member.clone(), ii_retyped),
        /* 22 */ (community, owner.clone(), rev(m, "create", Uuid::new_v4(), s.open, None, &[])),
        /* 23 */ (community, member.clone(), rev(m, "create", Uuid::new_v4(), s.archived, None, &[])),
        /* 24 */ (community, read_only.clone(), rev(m, "create", Uuid::new_v4(), s.open, None, &[])),
        /* 25 */ (community, member.clone(), rev(m, "update", j, s.open, Some(&j_deleted.id), &[])),
        /* 26 */ (community, member.clone(), rev(m, "restore", k, s.open, Some(&created[10].id), &[])),
        /* 27 */ (community, member.clone(), rev(m, "delete", l, s.open, Some(&created[11].id), &[])),
        /* 28 */ (community, member.clone(), rev(m, "move", n, s.open, Some(&created[12].id), &[])),
        /* 29 */
        (
            community,
            member.clone(),
            rev(m, "move", o, s.other, Some(&created[13].id), &[tag("root", "cd".repeat(32))]),
        ),
        /* 30 */
        (community, member.clone(), rev(m, "update", h, s.private, Some(&created[7].id), &[])),
    ];
    let outcomes = write_revisions(&pools, &relay_keys, batch.clone()).await;
    assert_eq!(outcomes.len(), batch.len());
    let answers: Vec<_> = outcomes.iter().map(answer).collect();

    let applied = Ok((false, String::new()));
    let dup = Ok((true, "duplicate: already have this event".to_owned()));
    let stale = Err(BusError::new(buzz_bus::ErrorCode::Conflict, "prev is not the current revision"));
    assert_eq!(answers[0], applied, "a create");
    assert_eq!(answers[1], applied, "an update naming the current revision");
    assert_eq!(answers[2], stale, "its rival on the same prev, written after the batch");
    assert_eq!(answers[3], dup, "an accepted revision resubmitted");
    assert_eq!(answers[4], stale, "a stale prev");
    assert_eq!(answers[5], stale, "an unknown d");
    assert_eq!(
        answers[6],
        Err(BusError::invalid("h must be the artifact's home channel; use op=move to change it"))
    );
    assert_eq!(answers[7], applied, "a move, written alone");
    assert_eq!(answers[8], applied, "a delete, written alone");
    assert_eq!(answers[9], applied, "a restore, written alone");
    assert_eq!(answers[10], Err(BusError::new(buzz_bus::ErrorCode::Conflict, "artifact identity is taken")));
    assert_eq!(answers[11], applied);
    assert_eq!(answers[12], dup, "the same revision twice in one batch is stored once");
    assert_eq!(answers[13], Err(BusError::restricted("not a member of this community")));
    assert_eq!(answers[14], Err(BusError::restricted("channel not found or not accessible")));
    assert!(matches!(&answers[15], Err(b) if b.code == buzz_bus::ErrorCode::Invalid), "{:?}", answers[15]);
    assert_eq!(
        answers[16],
        Err(BusError::invalid("root must be an existing, undeleted conversation anchor in h"))
    );
    assert_eq!(answers[17], applied, "a create on an anchor");
    assert_eq!(
        answers[18],
        Err(BusError::invalid("root must be an existing, undeleted conversation anchor in h"))
    );
    assert_eq!(answers[19], applied, "an update setting a root that is an anchor");
    assert_eq!(answers[20], Err(BusError::restricted("community is not active")));
    assert_eq!(answers[21], Err(BusError::invalid("type is immutable")));
    assert_eq!(answers[22], Err(BusError::restricted("event pubkey is not the authenticated pubkey")));
    assert_eq!(answers[23], Err(BusError::blocked("channel is archived")));
    assert_eq!(answers[24], Err(BusError::restricted("token does not allow writing to this channel")));
    assert_eq!(answers[25], Err(BusError::invalid("artifact is deleted; only restore is accepted")));
    assert_eq!(answers[26], Err(BusError::invalid("only a deleted artifact can be restored")));
    assert_eq!(answers[27], Err(BusError::invalid("a deletion preserves the current root")));
    assert_eq!(
        answers[28],
        Err(BusError::invalid("a move changes h; use op=update to stay in the home channel"))
    );
    assert_eq!(
        answers[29],
        Err(BusError::invalid("a move's root must be absent or a conversation anchor in the destination"))
    );
    assert_eq!(
        answers[30],
        Err(BusError::restricted("channel not found or not accessible")),
        "the write rule in h comes before anything about the artifact"
    );

    // Every refusal is the single path's answer for the same revision (a refusal stores nothing;
    // the rival's prev is stale for the single path too, since the batch advanced `a`).
    for (i, (c, actor, event)) in batch.iter().enumerate() {
        if answers[i].is_err() {
            let again = buzz_write::write_event(pool, *c, actor, event.clone(), &relay).await;
            assert_eq!(answer(&again), answers[i], "revision {i}");
        }
    }

    // The same stored state: neither path stored or recorded a refused revision.
    let refused: Vec<&str> =
        batch.iter().zip(&answers).filter(|(_, a)| a.is_err()).map(|((_, _, e), _)| e.id.as_str()).collect();
    let stored: (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM events WHERE id = ANY($1)), \
                (SELECT count(*) FROM artifact_revisions WHERE revision_id = ANY($1))",
    )
    .bind(&refused)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!((refused.len(), stored), (21, (0, 0)), "no refused revision is stored or recorded");

    // Stored and current: `a` is at a1, its chain recorded; the mention a1 adds is recorded once.
    let current: String =
        sqlx::query_scalar("SELECT current_revision FROM artifacts WHERE community_id = $1 AND d = $2")
            .bind(community)
            .bind(a)
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(current, a1.id);
    let prev: Option<String> = sqlx::query_scalar(
        "SELECT prev FROM artifact_revisions WHERE community_id = $1 AND revision_id = $2",
    )
    .bind(community)
    .bind(&a1.id)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(prev.as_deref(), Some(created[0].id.as_str()));
    let mentions: i64 =
        sqlx::query_scalar("SELECT count(*) FROM mentions WHERE community_id = $1 AND event_id = $2")
            .bind(community)
            .bind(&a1.id)
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(mentions, 1);

    // The update's live event names the current-tag rows it replaced (the create's), sorted.
    let live = outcomes[1].as_ref().unwrap().live.as_ref().unwrap();
    let replaced: Vec<&str> = live.replaced_tags.iter().map(|[name, _]| name.as_str()).collect();
    assert_eq!(replaced, ["ar", "d", "h", "op", "status", "title", "type"]);
    let version: i64 = sqlx::query_scalar("SELECT access_version FROM communities WHERE id = $1")
        .bind(community)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(live.access_version, version);
    assert_eq!(live.channel_id, Some(buzz_core::ChannelId(s.open)));
    assert!(outcomes[0].as_ref().unwrap().live.as_ref().unwrap().replaced_tags.is_empty());

    current_tags_match_current_revisions(pool, community).await;
    s.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_whose_storage_fails_never_takes_its_batch_mates_down() {
    let s = setup().await;
    let pool = &s.cluster.pool;
    let pools = Pools { batch: pool.clone(), single: pool.clone() };
    buzz_tests::helpers::poison_pills_fail_to_store(pool).await;
    let member = Actor::session(s.member.pubkey());
    let relay = Keys::generate();
    let mut batch: Vec<(CommunityId, Actor, Event)> = (0..12)
        .map(|_| {
            (s.community.id, member.clone(), rev(&s.member, "create", Uuid::new_v4(), s.open, None, &[]))
        })
        .collect();
    let poison = rev(&s.member, "create", Uuid::new_v4(), s.open, None, &[tag("note", "a poison pill")]);
    batch.insert(5, (s.community.id, member.clone(), poison.clone()));
    let mut outcomes = write_revisions(&pools, &relay, batch.clone()).await;
    match outcomes.remove(5) {
        Ok(_) => panic!("the poisoned revision was accepted"),
        Err(e) => assert_eq!(BusError::from(e), BusError::unavailable("storage unavailable")),
    }
    for (i, outcome) in outcomes.iter().enumerate() {
        assert!(outcome.as_ref().is_ok_and(|a| !a.ok.duplicate), "revision {i}");
    }
    let artifacts: i64 = sqlx::query_scalar("SELECT count(*) FROM artifacts WHERE community_id = $1")
        .bind(s.community.id)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(artifacts, 12, "all but the poisoned revision are stored, and its claim rolled back");
    current_tags_match_current_revisions(pool, s.community.id).await;
    s.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_update_chains_through_the_gateways_never_fork_and_every_ok_is_current_or_history() {
    let s = setup().await;
    // 6 writers, each keeping one update in flight on 3 shared artifacts (so batches hold rival
    // updates on one prev), alternating gateways. An OK means accepted; a conflict means another
    // writer's revision got there first; the chain of each artifact is one line.
    let mut ws = WsClient::authed(s.cluster.gateways[0], &s.community.host, &s.member).await;
    let ds = [Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4()];
    for d in ds {
        let (ok, msg) = ws.publish(&rev(&s.member, "create", d, s.open, None, &[])).await;
        assert!(ok, "{msg}");
    }
    let mut writers = Vec::new();
    for w in 0..6 {
        let keys = s.cluster.member(&s.community).await;
        let addr = s.cluster.gateways[w % s.cluster.gateways.len()];
        let (host, open, pool) = (s.community.host.clone(), s.open, s.cluster.pool.clone());
        writers.push(tokio::spawn(async move {
            let mut ws = WsClient::authed(addr, &host, &keys).await;
            let mut accepted = 0;
            for i in 0..30 {
                let d = ds[(w + i) % ds.len()];
                let current: String =
                    sqlx::query_scalar("SELECT current_revision FROM artifacts WHERE d = $1")
                        .bind(d)
                        .fetch_one(&pool)
                        .await
                        .unwrap();
                let ev = rev(&keys, "update", d, open, Some(&current), &[tag("status", format!("{w}/{i}"))]);
                let (ok, msg) = ws.publish(&ev).await;
                if ok {
                    assert!(msg.is_empty(), "{msg}");
                    accepted += 1;
                } else {
                    assert_eq!(msg, "conflict: prev is not the current revision");
                }
            }
            accepted
        }));
    }
    let mut accepted = 0;
    for w in writers {
        accepted += w.await.unwrap();
    }
    assert!(accepted > 0);
    let pool = &s.cluster.pool;
    let recorded: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM artifact_revisions WHERE community_id = $1 AND op = 'update'",
    )
    .bind(s.community.id)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(recorded, accepted, "every OK is one recorded revision");
    // Each chain is a line from its create to its current revision, through every recorded update.
    for d in ds {
        let length: i64 = sqlx::query_scalar(
            "WITH RECURSIVE chain AS ( \
                 SELECT r.revision_id, r.prev FROM artifact_revisions r JOIN artifacts a \
                   ON a.community_id = r.community_id AND a.current_revision = r.revision_id WHERE a.d = $1 \
                 UNION ALL \
                 SELECT r.revision_id, r.prev FROM artifact_revisions r JOIN chain ON r.revision_id = chain.prev) \
             SELECT count(*) FROM chain",
        )
        .bind(d)
        .fetch_one(pool)
        .await
        .unwrap();
        let all: i64 = sqlx::query_scalar("SELECT count(*) FROM artifact_revisions WHERE d = $1")
            .bind(d)
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(length, all, "artifact {d}: every accepted revision is on the one chain");
    }
    current_tags_match_current_revisions(pool, s.community.id).await;
    s.cluster.stop().await;
}
