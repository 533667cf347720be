//! Property: a sequence of writes through group commit (`write_posts`, `write_revisions`) answers
//! and stores exactly what the one-at-a-time path (`write_event`) answers and stores for the same
//! sequence. The hand-written cases are `group_commit.rs` and `revision_group_commit.rs`; this test
//! generates them.
//!
//! Each case is a sequence of rounds, each round a batch of one family (kind-9 posts, or NIP-AR
//! revisions: the write-service batches each family apart): posts in open, private, archived and
//! unknown channels, replies to an anchor or to nothing, mentions; revisions creating, updating,
//! moving, deleting and restoring artifacts with the right prev, a stale one or an unknown one, in
//! their home or elsewhere; copies of earlier writes (duplicates, also by another writer); writers
//! that are members, the owner's admin, non-members, a read-only token, or not the event's author.
//! Two communities get the same channels, members and prior state; the rounds go to one as
//! batches and to the other one write at a time, in order. Then every answer and the stored state
//! (events and their tag rows, artifacts, revision records, current-tag rows, mentions, read
//! markers) must be equal.
//!
//! What is legitimately different, and left out of the comparison: acceptance order (`seq`): a
//! batch leaves what it does not decide itself (moves, deletes, restores, a second revision of one
//! artifact) to after its commit, so those take later `seq`s; read markers are compared by the
//! event they point at. Events the relay signs (a move's 45011 removal, a channel's 39000/39002)
//! carry the second they were signed, so they are compared by kind, channel and tags, not id. A
//! post replying to another post of the same batch is judged on the state before the batch (the
//! batch reads its view first; such posts are concurrent, so either order is a valid answer): the
//! generated replies name only the anchor written before the rounds.

#![allow(clippy::unwrap_used)]

use buzz_bus::{Actor, BusError, Scope};
use buzz_core::{Event, Keys};
use buzz_tests::helpers::tag;
use buzz_tests::Cluster;
use buzz_write::error::{WriteError, WriteResult};
use buzz_write::write_revisions;
use buzz_write::{write_posts, Pools};
use buzz_write::{Accepted, Relay};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use uuid::Uuid;

#[path = "group_commit_props/cases.rs"]
mod cases;
use cases::{materialize, prior, revision_event, rounds, Prior, Round, Write, ARTIFACTS};

/// An answer as the client sees it: accepted (duplicate, message, the current-tag rows a revision
/// replaced, how many relay events it added) or the refusal.
type Answer = Result<(bool, String, Vec<[String; 2]>, usize), BusError>;

fn answer(outcome: WriteResult<Accepted>) -> Result<Answer, TestCaseError> {
    match outcome {
        Ok(a) => {
            let replaced = a.live.as_ref().map(|l| l.replaced_tags.clone()).unwrap_or_default();
            Ok(Ok((a.ok.duplicate, a.ok.message, replaced, a.also.len())))
        }
        Err(WriteError::Refused(b)) => Ok(Err(b)),
        Err(other) => Err(TestCaseError::fail(format!("storage failure: {other}"))),
    }
}

/// A community with the admin (keys[0]) and the member (keys[1]), and the prior state.
async fn side(cluster: &Cluster, keys: &[Keys; 3], prior: &Prior, relay: &Keys) -> buzz_core::CommunityId {
    let host = format!("{}.batches.test", Uuid::new_v4().simple());
    let community = cluster.community(&host).await;
    let owner = Actor::session(community.owner.pubkey());
    for (k, role) in keys[..2].iter().zip([buzz_core::Role::Admin, buzz_core::Role::Member]) {
        let pubkey = k.pubkey();
        buzz_write::members::put_member(&cluster.pool, community.id, &owner, &pubkey, role).await.unwrap();
    }
    let relay = Relay { keys: relay };
    for (author, e) in &prior.events {
        let actor = Actor::session(keys[*author].pubkey());
        let r = buzz_write::write_event(&cluster.pool, community.id, &actor, e.clone(), &relay).await;
        assert!(r.is_ok(), "prior state: kind {}: {:?}", e.kind, r.err().map(|e| e.to_string()));
    }
    community.id
}

/// An `events` row: id, kind, channel, thread root, deleted, redacted.
type EventRow = (String, i64, Option<Uuid>, Option<String>, bool, bool);
/// An `artifacts` row: d, type, current revision, home, root, deleted, mentioned keys.
type ArtifactRow = (Uuid, String, String, Uuid, Option<String>, bool, Vec<String>);

/// The stored state of a community, without its id, acceptance order or timestamps.
#[derive(Debug, Default, PartialEq, Eq)]
struct State {
    events: Vec<EventRow>,
    relay_events: Vec<(i64, Option<Uuid>, String)>,
    tags: Vec<(String, String, Vec<u8>)>,
    relay_tags: i64,
    artifacts: Vec<ArtifactRow>,
    revisions: Vec<(String, Uuid, Option<String>, String, Uuid)>,
    current_tags: Vec<(Uuid, String, Vec<u8>, Uuid, String, String)>,
    mentions: Vec<(String, String, Uuid)>,
    markers: Vec<(Uuid, String, String)>,
}

async fn state(pool: &sqlx::PgPool, community: buzz_core::CommunityId, relay: &str) -> State {
    macro_rules! rows {
        ($sql:expr) => {
            sqlx::query_as($sql).bind(community).bind(relay).fetch_all(pool).await.unwrap()
        };
    }
    State {
        events: rows!(
            "SELECT id, kind, channel_id, thread_root, deleted_at IS NOT NULL, redacted_at IS NOT NULL \
             FROM events WHERE community_id = $1 AND pubkey <> $2 ORDER BY id"
        ),
        relay_events: rows!(
            "SELECT kind, channel_id, (raw::jsonb -> 'tags')::text FROM events \
             WHERE community_id = $1 AND pubkey = $2 ORDER BY 1, 2, 3"
        ),
        tags: rows!(
            "SELECT t.event_id, t.name, t.value_hash FROM event_tags t JOIN events e \
               ON e.community_id = t.community_id AND e.id = t.event_id \
             WHERE t.community_id = $1 AND e.pubkey <> $2 ORDER BY 1, 2, 3"
        ),
        relay_tags: sqlx::query_scalar(
            "SELECT count(*) FROM event_tags t JOIN events e ON e.community_id = t.community_id AND e.id = t.event_id \
             WHERE t.community_id = $1 AND e.pubkey = $2",
        )
        .bind(community)
        .bind(relay)
        .fetch_one(pool)
        .await
        .unwrap(),
        artifacts: rows!(
            "SELECT d, type, current_revision, home_channel, root, deleted, mentioned FROM artifacts \
             WHERE community_id = $1 AND $2 <> '' ORDER BY d"
        ),
        revisions: rows!(
            "SELECT revision_id, d, prev, op, channel_id FROM artifact_revisions \
             WHERE community_id = $1 AND $2 <> '' ORDER BY 1"
        ),
        current_tags: rows!(
            "SELECT d, name, value_hash, home_channel, revision, type FROM artifact_current_tags \
             WHERE community_id = $1 AND $2 <> '' ORDER BY 1, 2, 3"
        ),
        mentions: rows!(
            "SELECT pubkey, event_id, channel_id FROM mentions WHERE community_id = $1 AND $2 <> '' ORDER BY 1, 2"
        ),
        markers: rows!(
            "SELECT channel_id, pubkey, event_id FROM read_markers WHERE community_id = $1 AND $2 <> '' \
             ORDER BY 1, 2"
        ),
    }
}

/// What both paths made of the same rounds: each write's answer, batched and one at a time, and
/// the two stored states.
struct Outcome {
    batched: Vec<Answer>,
    single: Vec<Answer>,
    states: (State, State),
}

/// Runs `rounds` (each: is it a revision batch, its writes) through both paths, each on a fresh
/// community with `prior` written first.
async fn both(
    cluster: &Cluster,
    keys: &[Keys; 3],
    relay: &Keys,
    prior: &Prior,
    rounds: &[(bool, Vec<Write>)],
) -> Result<Outcome, TestCaseError> {
    let (batched, single) =
        (side(cluster, keys, prior, relay).await, side(cluster, keys, prior, relay).await);
    let pool = &cluster.pool;
    let pools = Pools { batch: pool.clone(), single: pool.clone() };
    let relay_signer = Relay { keys: relay };
    let mut out = Outcome { batched: Vec::new(), single: Vec::new(), states: Default::default() };
    for (revisions, batch) in rounds {
        let items: Vec<(buzz_core::CommunityId, Actor, Event)> =
            batch.iter().map(|w| (batched, w.actor.clone(), w.event.clone())).collect();
        let outcomes = if *revisions {
            write_revisions(&pools, relay, items).await
        } else {
            write_posts(pool, relay, items).await
        };
        prop_assert_eq!(outcomes.len(), batch.len());
        for outcome in outcomes {
            out.batched.push(answer(outcome)?);
        }
        for w in batch {
            let alone = buzz_write::write_event(pool, single, &w.actor, w.event.clone(), &relay_signer).await;
            out.single.push(answer(alone)?);
        }
    }
    let relay_hex = relay.public_hex();
    out.states = (state(pool, batched, &relay_hex).await, state(pool, single, &relay_hex).await);
    Ok(out)
}

async fn run_case(
    cluster: &Cluster,
    keys: &[Keys; 3],
    relay: &Keys,
    rounds: Vec<Round>,
) -> Result<usize, TestCaseError> {
    let prior = prior(keys);
    let built: Vec<(bool, Vec<Write>)> =
        rounds.iter().map(|r| r.revisions).zip(materialize(&rounds, &prior, keys)).collect();
    let writes: Vec<&Write> = built.iter().flat_map(|(_, w)| w).collect();
    let Outcome { batched, single, states: (b, s) } = both(cluster, keys, relay, &prior, &built).await?;
    for (i, w) in writes.iter().enumerate() {
        prop_assert_eq!(
            &batched[i],
            &single[i],
            "write {} (kind {}): batch vs one at a time: {}",
            i,
            w.event.kind,
            w.event.to_json()
        );
    }
    prop_assert!(!b.events.is_empty());
    macro_rules! same {
        ($($field:ident),*) => {
            $(prop_assert_eq!(&b.$field, &s.$field, "stored {}", stringify!($field));)*
        };
    }
    same!(events, relay_events, tags, relay_tags, artifacts, revisions, current_tags, mentions, markers);
    Ok(writes.len())
}

#[test]
fn a_batch_of_writes_answers_and_stores_what_the_one_at_a_time_path_does() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let cluster = rt.block_on(Cluster::start());
    let keys: [Keys; 3] = [(); 3].map(|()| Keys::generate());
    let relay = Keys::generate();
    let (mut runner, seed) = buzz_tests::props::runner("group_commit_props", 32);
    let (cases, writes) = (std::sync::atomic::AtomicUsize::new(0), std::sync::atomic::AtomicUsize::new(0));
    let started = std::time::Instant::now();
    let result = runner.run(&rounds(), |rounds| {
        cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = rt.block_on(run_case(&cluster, &keys, &relay, rounds))?;
        writes.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    });
    eprintln!(
        "group_commit_props: {cases:?} cases (shrinking included), {writes:?} writes each way, in {:?}",
        started.elapsed()
    );
    rt.block_on(cluster.stop());
    if let Err(e) = result {
        panic!("seed {seed}: {e}");
    }
}

fn session(keys: &Keys) -> Actor {
    Actor::session(keys.pubkey())
}

fn read_only(keys: &Keys) -> Actor {
    Actor { scopes: vec![Scope::MessagesRead], ..session(keys) }
}

/// Runs one batch of `writes` both ways on fresh sides; (batched, single) answers.
async fn one_batch(
    revisions: bool,
    writes: impl Fn(&Prior, &[Keys; 3]) -> Vec<Write>,
) -> (Vec<Answer>, Vec<Answer>) {
    let cluster = Cluster::start().await;
    let keys: [Keys; 3] = [(); 3].map(|()| Keys::generate());
    let relay = Keys::generate();
    let prior = prior(&keys);
    let batch = writes(&prior, &keys);
    let out = both(&cluster, &keys, &relay, &prior, &[(revisions, batch)]).await.unwrap();
    assert_eq!(out.batched, out.single, "the same answers");
    assert!(out.states.0 == out.states.1, "the same stored state");
    cluster.stop().await;
    (out.batched, out.single)
}

/// Found by the property: a post sent twice in one batch, the second time through a token that may
/// not write there, was refused (`restricted: token does not allow writing`) where the
/// one-at-a-time path answers an already accepted event `duplicate:` before any write rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_a_post_accepted_earlier_in_its_batch_is_a_duplicate_whatever_its_credential() {
    let (batched, single) = one_batch(false, |prior, keys| {
        let post = keys[1].sign_new(9, vec![tag("h", prior.channels[0])], "twice");
        vec![
            Write { actor: session(&keys[1]), event: post.clone() },
            Write { actor: read_only(&keys[1]), event: post.clone() },
            Write {
                actor: Actor {
                    channel_ids: Some(vec![buzz_core::ChannelId(prior.channels[2])]),
                    ..session(&keys[1])
                },
                event: post,
            },
        ]
    })
    .await;
    let dup = Ok((true, "duplicate: already have this event".to_owned(), Vec::new(), 0));
    assert_eq!(single[1..], [dup.clone(), dup.clone()]);
    assert_eq!(batched, single);
}

/// The same for a revision: its copy in the batch, through a read-only token, is answered after the
/// batch's commit as the one-at-a-time path answers it (`duplicate:`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_a_revision_accepted_earlier_in_its_batch_is_a_duplicate_whatever_its_credential() {
    let (batched, single) = one_batch(true, |prior, keys| {
        let create = revision_event(&keys[1], "create", prior.ds[ARTIFACTS], prior.channels[0], None);
        vec![
            Write { actor: session(&keys[1]), event: create.clone() },
            Write { actor: read_only(&keys[1]), event: create },
        ]
    })
    .await;
    assert_eq!(single[1], Ok((true, "duplicate: already have this event".to_owned(), Vec::new(), 0)));
    assert_eq!(batched, single);
}

/// Found by the property: a move (left by the batch to after its commit) then an update of the same
/// artifact in one batch. The batch decided the update itself, before the move (a move did not
/// count as the artifact's first revision in the batch), so the update was applied and the move
/// refused, where one at a time the move is applied and the update's prev is stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_then_an_update_of_one_artifact_in_a_batch_are_answered_in_their_order() {
    let (batched, single) = one_batch(true, |prior, keys| {
        let current = prior.events.iter().rev().find(|(_, e)| e.kind == 45010).unwrap().1.clone();
        let d = prior.ds[ARTIFACTS - 1];
        let id = current.id.to_string();
        let moved = revision_event(&keys[1], "move", d, prior.channels[1], Some(&id));
        let update = revision_event(&keys[1], "update", d, prior.channels[0], Some(&id));
        let moved_twice = Write { actor: read_only(&keys[1]), event: moved.clone() };
        vec![
            Write { actor: session(&keys[1]), event: moved },
            Write { actor: session(&keys[1]), event: update },
            moved_twice,
        ]
    })
    .await;
    assert!(matches!(&single[0], Ok((false, _, _, 1))), "the move is applied: {:?}", single[0]);
    assert!(single[1].is_err(), "then the update's prev is stale: {:?}", single[1]);
    assert!(matches!(&single[2], Ok((true, ..))), "the move's copy is a duplicate: {:?}", single[2]);
    assert_eq!(batched, single);
}
