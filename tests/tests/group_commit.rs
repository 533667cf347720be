//! Group commit of kind-9 posts (`buzz_write::post::batch`): a batch answers every post exactly as the
//! single-post path does, stores what it accepts once with its mentions and read markers, and a
//! post whose storage fails never takes its batch-mates down.

#![allow(clippy::unwrap_used)]

use buzz_bus::{Actor, BusError};
use buzz_core::{CommunityId, Event, Keys};
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::{Cluster, Community};
use buzz_write::write_posts;
use buzz_write::Relay;
use uuid::Uuid;

fn post(keys: &Keys, channel: impl ToString, content: &str, extra: &[&[&str]]) -> Event {
    let mut tags = vec![vec!["h".to_owned(), channel.to_string()]];
    tags.extend(extra.iter().map(|t| t.iter().map(|s| (*s).to_owned()).collect()));
    keys.sign_new(9, tags, content)
}

struct Setup {
    cluster: Cluster,
    community: Community,
    member: Keys,
    open: Uuid,
    private: Uuid,
    archived: Uuid,
}

async fn setup() -> Setup {
    let cluster = Cluster::start().await;
    let community = cluster.community("batch.test").await;
    let member = cluster.member(&community).await;
    let mut ws = WsClient::authed(cluster.gateways[0], &community.host, &community.owner).await;
    let (open, private, archived) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    for (id, visibility) in [(open, "open"), (private, "private"), (archived, "open")] {
        let (ok, msg) = ws.publish(&create_channel(&community.owner, id, "c", visibility)).await;
        assert!(ok, "{msg}");
    }
    let archive = post(&community.owner, archived, "", &[&["archived", "true"]]);
    let archive = community.owner.sign_new(9002, archive.tags, "");
    let (ok, msg) = ws.publish(&archive).await;
    assert!(ok, "{msg}");
    Setup { cluster, community, member, open, private, archived }
}

/// `(duplicate, message)` of an accepted post, or the answer to a refused one.
fn answer(
    outcome: &buzz_write::error::WriteResult<buzz_write::Accepted>,
) -> Result<(bool, String), BusError> {
    match outcome {
        Ok(a) => Ok((a.ok.duplicate, a.ok.message.clone())),
        Err(e) => Err(refusal(e)),
    }
}

fn refusal(e: &buzz_write::error::WriteError) -> BusError {
    use buzz_write::error::WriteError;
    match e {
        WriteError::Refused(b) => b.clone(),
        other => panic!("unexpected storage failure: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_batch_answers_every_post_as_the_single_post_path_does() {
    let s = setup().await;
    let pool = &s.cluster.pool;
    let relay_keys = Keys::generate();
    let relay = Relay { keys: &relay_keys };
    let community = s.community.id;
    let member = Actor::session(s.member.pubkey());
    let owner = Actor::session(s.community.owner.pubkey());
    let outsider_keys = Keys::generate();
    let outsider = Actor::session(outsider_keys.pubkey());
    let read_only = Actor { scopes: vec![buzz_bus::Scope::MessagesRead], ..member.clone() };
    let elsewhere = Actor { channel_ids: Some(vec![buzz_core::ChannelId(s.private)]), ..member.clone() };

    // An anchor, an already-stored post and a post its author then deleted (kind 5), written
    // alone first.
    let anchor = post(&s.member, s.open, "anchor", &[]);
    let stored = post(&s.member, s.open, "stored before", &[]);
    let deleted = post(&s.member, s.open, "deleted by its author", &[]);
    let deletion = s.member.sign_new(5, vec![vec!["e".to_owned(), deleted.id.to_string()]], "");
    for e in [&anchor, &stored, &deleted, &deletion] {
        let r = buzz_write::write_event(pool, community, &member, e.clone(), &relay).await;
        assert!(r.is_ok_and(|a| !a.ok.duplicate));
    }
    let reply = post(&s.member, s.open, "a reply", &[&["e", &anchor.id, "", "root"]]);

    let owner_hex = s.community.owner.public_hex();
    let twice = post(&s.member, s.open, "sent twice in one batch", &[]);
    let batch: Vec<(CommunityId, Actor, Event)> = vec![
        (community, member.clone(), post(&s.member, s.open, "hello", &[&["p", &owner_hex]])),
        (community, member.clone(), twice.clone()),
        (community, member.clone(), twice.clone()),
        (community, member.clone(), stored.clone()),
        (community, member.clone(), reply.clone()),
        (community, outsider.clone(), post(&outsider_keys, s.open, "not a member", &[])),
        (community, member.clone(), post(&s.member, s.private, "not joined", &[])),
        (community, member.clone(), post(&s.member, "not-a-uuid", "bad h", &[])),
        (
            community,
            member.clone(),
            post(&s.member, s.open, "bad root", &[&["e", &"ab".repeat(32), "", "root"]]),
        ),
        (community, member.clone(), post(&s.member, s.open, "malformed root", &[&["e", "xyz", "", "root"]])),
        (community, owner.clone(), post(&s.member, s.open, "someone else's key", &[])),
        (CommunityId::new_v4(), member.clone(), post(&s.member, s.open, "no such community", &[])),
        (community, owner.clone(), post(&s.community.owner, s.private, "owner in private", &[])),
        (community, member.clone(), post(&s.member, s.open, "last", &[])),
        (community, member.clone(), deleted.clone()),
        (community, outsider.clone(), deleted.clone()),
        /* 16 */ (community, member.clone(), s.member.sign_new(9, vec![], "no h")),
        /* 17 */
        (
            community,
            member.clone(),
            post(
                &s.member,
                s.open,
                "two roots",
                &[&["e", &anchor.id, "", "root"], &["e", &anchor.id, "", "root"]],
            ),
        ),
        /* 18 */ (community, member.clone(), post(&s.member, s.archived, "archived", &[])),
        /* 19 */ (community, read_only.clone(), post(&s.member, s.open, "read-only token", &[])),
        /* 20 */
        (community, elsewhere.clone(), post(&s.member, s.open, "token for another channel", &[])),
    ];
    let outcomes = write_posts(pool, &relay_keys, batch.clone()).await;
    assert_eq!(outcomes.len(), batch.len());
    let answers: Vec<_> = outcomes.iter().map(answer).collect();

    let applied = Ok((false, String::new()));
    let dup = Ok((true, "duplicate: already have this event".to_owned()));
    assert_eq!(answers[0], applied);
    assert_eq!(answers[1], applied);
    assert_eq!(answers[2], dup, "the second copy in one batch is a duplicate");
    assert_eq!(answers[3], dup, "an already stored post is a duplicate");
    assert_eq!(answers[4], applied, "a reply to a stored anchor");
    assert_eq!(answers[5], Err(BusError::restricted("not a member of this community")));
    assert_eq!(answers[6], Err(BusError::restricted("channel not found or not accessible")));
    assert_eq!(answers[7], Err(BusError::invalid("h must be a lowercase hyphenated non-nil UUID")));
    assert_eq!(
        answers[8],
        Err(BusError::invalid("thread root must be a conversation anchor in this channel"))
    );
    assert_eq!(answers[9], Err(BusError::invalid("thread root must be a 64-char lowercase hex event id")));
    assert_eq!(answers[10], Err(BusError::restricted("event pubkey is not the authenticated pubkey")));
    assert_eq!(answers[11], Err(BusError::restricted("community is not active")));
    assert_eq!(answers[12], applied, "the owner created the private channel and is its member");
    assert_eq!(answers[13], applied);
    assert_eq!(
        answers[14],
        Err(BusError::blocked("deleted by its author")),
        "a post its author deleted is not told it is stored"
    );
    assert_eq!(
        answers[15],
        Err(BusError::restricted("event pubkey is not the authenticated pubkey")),
        "the author check still comes first"
    );
    assert_eq!(answers[16], Err(BusError::invalid("missing h tag")));
    assert_eq!(answers[17], Err(BusError::invalid("a reply names exactly one root")));
    assert_eq!(answers[18], Err(BusError::blocked("channel is archived")));
    let scope = Err(BusError::restricted("token does not allow writing to this channel"));
    assert_eq!(answers[19], scope, "a token without messages:write");
    assert_eq!(answers[20], scope, "a token restricted to another channel");

    // Every refusal is the single path's answer for the same post, byte for byte (a refusal stores
    // nothing, so the single path sees the state the batch saw).
    for (i, (c, actor, event)) in batch.iter().enumerate() {
        if answers[i].is_err() {
            let alone = buzz_write::write_event(pool, *c, actor, event.clone(), &relay).await;
            assert_eq!(answer(&alone), answers[i], "post {i}");
        }
    }

    // The same stored state: neither path stored a refused post (the deleted one was stored
    // before the batch and is checked below).
    let refused: Vec<&str> = batch
        .iter()
        .zip(&answers)
        .filter(|((_, _, e), a)| a.is_err() && e.id != deleted.id)
        .map(|((_, _, e), _)| e.id.as_str())
        .collect();
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE id = ANY($1)")
        .bind(&refused)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!((refused.len(), stored), (12, 0), "no refused post is stored");

    // The deleted post is still the one row, still deleted: never stored again.
    let (rows, still_deleted): (i64, bool) = sqlx::query_as(
        "SELECT count(*), bool_and(deleted_at IS NOT NULL) FROM events WHERE community_id = $1 AND id = $2",
    )
    .bind(community)
    .bind(&deleted.id)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!((rows, still_deleted), (1, true));

    // Stored once each, in batch order; the mention is recorded; the member's marker is at their
    // last post of the batch.
    let ids = [&batch[0].2.id, &twice.id, &reply.id, &batch[13].2.id];
    let rows: Vec<(String, i64, Option<String>)> = sqlx::query_as(
        "SELECT id, seq, thread_root FROM events WHERE community_id = $1 AND id = ANY($2) ORDER BY seq",
    )
    .bind(community)
    .bind(ids.iter().map(|s| s.as_str()).collect::<Vec<_>>())
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(rows.iter().map(|r| &r.0).collect::<Vec<_>>(), ids);
    assert_eq!(rows[2].2.as_deref(), Some(anchor.id.as_str()));
    let tags: i64 =
        sqlx::query_scalar("SELECT count(*) FROM event_tags WHERE community_id = $1 AND event_id = $2")
            .bind(community)
            .bind(&batch[0].2.id)
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(tags, 2, "h and p are indexed");
    let mention: Option<String> =
        sqlx::query_scalar("SELECT event_id FROM mentions WHERE community_id = $1 AND pubkey = $2")
            .bind(community)
            .bind(&owner_hex)
            .fetch_optional(pool)
            .await
            .unwrap();
    assert_eq!(mention.as_deref(), Some(batch[0].2.id.as_str()));
    let marker: (String, i64) = sqlx::query_as(
        "SELECT event_id, seq FROM read_markers WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3",
    )
    .bind(community)
    .bind(s.open)
    .bind(s.member.public_hex())
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(marker, (batch[13].2.id.to_string(), rows[3].1));

    // Live events: the accepted posts carry their channel and the community's access version.
    let live = outcomes[0].as_ref().unwrap().live.as_ref().unwrap();
    assert_eq!(live.channel_id, Some(buzz_core::ChannelId(s.open)));
    let version: i64 = sqlx::query_scalar("SELECT access_version FROM communities WHERE id = $1")
        .bind(community)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(live.access_version, version);
    s.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_whose_storage_fails_never_takes_its_batch_mates_down() {
    let s = setup().await;
    let pool = &s.cluster.pool;
    // A storage failure only one post runs into: a trigger refusing its content.
    buzz_tests::helpers::poison_pills_fail_to_store(pool).await;
    let member = Actor::session(s.member.pubkey());
    let relay = Keys::generate();
    let mut batch: Vec<(CommunityId, Actor, Event)> = (0..20)
        .map(|i| (s.community.id, member.clone(), message(&s.member, s.open, &format!("post {i}"))))
        .collect();
    let poison = message(&s.member, s.open, "a poison pill");
    batch.insert(7, (s.community.id, member.clone(), poison.clone()));
    let mut outcomes = write_posts(pool, &relay, batch.clone()).await;
    match outcomes.remove(7) {
        Ok(_) => panic!("the poisoned post was accepted"),
        Err(e) => assert_eq!(BusError::from(e), BusError::unavailable("storage unavailable")),
    }
    for (i, outcome) in outcomes.iter().enumerate() {
        assert!(outcome.as_ref().is_ok_and(|a| !a.ok.duplicate), "post {i}");
    }
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE community_id = $1 AND id = ANY($2)")
            .bind(s.community.id)
            .bind(batch.iter().map(|(_, _, e)| e.id.clone()).collect::<Vec<_>>())
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(stored, 20, "all but the poisoned post are stored");
    s.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_posts_through_the_gateways_are_each_stored_once_and_answered_after_commit() {
    let s = setup().await;
    // 4 writers x 50 posts, 10 in flight each, alternating gateways: every OK is for a stored post.
    let mut writers = Vec::new();
    for w in 0..4 {
        let keys = s.cluster.member(&s.community).await;
        let addr = s.cluster.gateways[w % s.cluster.gateways.len()];
        let host = s.community.host.clone();
        let open = s.open;
        writers.push(tokio::spawn(async move {
            let mut ws = WsClient::authed(addr, &host, &keys).await;
            let events: Vec<Event> = (0..50).map(|i| message(&keys, open, &format!("{w}/{i}"))).collect();
            let mut ids = Vec::new();
            for chunk in events.chunks(10) {
                for e in chunk {
                    ws.send_json(&serde_json::json!(["EVENT", e])).await;
                }
                for e in chunk {
                    let (ok, msg) = ws.ok_for(&e.id).await;
                    assert!(ok && msg.is_empty(), "{msg}");
                    ids.push(e.id.clone());
                }
            }
            (keys.public_hex(), ids)
        }));
    }
    let pool = &s.cluster.pool;
    for w in writers {
        let (pubkey, ids) = w.await.unwrap();
        let stored: i64 =
            sqlx::query_scalar("SELECT count(*) FROM events WHERE community_id = $1 AND id = ANY($2)")
                .bind(s.community.id)
                .bind(&ids)
                .fetch_one(pool)
                .await
                .unwrap();
        assert_eq!(stored, 50);
        // The marker is at the writer's post with the highest acceptance order.
        let (marker, last): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT seq FROM read_markers WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3), \
                    (SELECT max(seq) FROM events WHERE community_id = $1 AND pubkey = $3)",
        )
        .bind(s.community.id)
        .bind(s.open)
        .bind(&pubkey)
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(marker, last);
    }
    s.cluster.stop().await;
}
