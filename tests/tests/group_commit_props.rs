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
use buzz_tests::client::create_channel;
use buzz_tests::helpers::tag;
use buzz_tests::Cluster;
use buzz_write::batch::{write_posts, Pools};
use buzz_write::error::{WriteError, WriteResult};
use buzz_write::revisions::write_revisions;
use buzz_write::shared::{Accepted, Relay};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use uuid::Uuid;

/// Channels of the prior state: open, other (open), private (the admin's), archived.
const CHANNELS: usize = 4;
/// Artifacts created in the prior state; generated revisions also name two new ones.
const ARTIFACTS: usize = 3;

/// Who sends a write.
#[derive(Debug, Clone, Copy)]
enum Writer {
    /// The event's author, with a full session.
    Author,
    /// The event's author through a token that may only read.
    ReadOnly,
    /// The event's author through a token for the private channel only.
    Restricted,
    /// Another member's session (not the event's key).
    Other,
}

#[derive(Debug, Clone)]
enum Prev {
    None,
    /// The last revision generated for this artifact (accepted or not).
    Latest,
    /// The artifact's first revision.
    First,
    Unknown,
}

#[derive(Debug, Clone)]
enum Spec {
    Post {
        /// 0 admin, 1 member, 2 non-member.
        author: usize,
        /// A channel index, or `CHANNELS` for an unknown channel.
        channel: usize,
        /// 0 none, 1 the anchor, 2 an unknown event, 3 the post deleted by its author (a copy of it).
        root: usize,
        mention: bool,
    },
    Revision {
        author: usize,
        /// 0..ARTIFACTS existing, then new ones.
        artifact: usize,
        op: usize,
        prev: Prev,
        /// 0 the artifact's home as generated so far, 1.. a channel index - 1.
        h: usize,
    },
    /// A copy of the `n`-th earlier write of the same family (modulo), by `writer`.
    Copy(usize),
}

#[derive(Debug, Clone)]
struct Round {
    revisions: bool,
    writes: Vec<(Spec, Writer)>,
}

fn writer() -> impl Strategy<Value = Writer> {
    prop_oneof![
        6 => Just(Writer::Author),
        1 => Just(Writer::ReadOnly),
        1 => Just(Writer::Restricted),
        1 => Just(Writer::Other),
    ]
}

fn post() -> impl Strategy<Value = Spec> {
    let author = prop_oneof![2 => Just(1usize), 1 => Just(0usize), 1 => Just(2usize)];
    let channel = prop_oneof![4 => Just(0usize), 1 => Just(1usize), 1 => Just(2usize), 1 => Just(3usize), 1 => Just(4usize)];
    let root = prop_oneof![4 => Just(0usize), 2 => Just(1usize), 1 => Just(2usize), 1 => Just(3usize)];
    (author, channel, root, any::<bool>()).prop_map(|(author, channel, root, mention)| Spec::Post {
        author,
        channel,
        root,
        mention,
    })
}

fn revision() -> impl Strategy<Value = Spec> {
    let author = prop_oneof![3 => Just(1usize), 1 => Just(0usize), 1 => Just(2usize)];
    let op = prop_oneof![2 => Just(0usize), 5 => Just(1usize), 1 => Just(2usize), 1 => Just(3usize), 1 => Just(4usize)];
    let prev = prop_oneof![
        1 => Just(Prev::None),
        6 => Just(Prev::Latest),
        2 => Just(Prev::First),
        1 => Just(Prev::Unknown),
    ];
    let h = prop_oneof![6 => Just(0usize), 1 => Just(1usize), 1 => Just(2usize), 1 => Just(3usize), 1 => Just(4usize)];
    (author, 0..ARTIFACTS + 2, op, prev, h).prop_map(|(author, artifact, op, prev, h)| Spec::Revision {
        author,
        artifact,
        op,
        prev,
        h,
    })
}

fn round() -> impl Strategy<Value = Round> {
    any::<bool>().prop_flat_map(|revisions| {
        let spec = if revisions { revision().boxed() } else { post().boxed() };
        let spec = prop_oneof![5 => spec, 1 => (0..16usize).prop_map(Spec::Copy)];
        prop::collection::vec((spec, writer()), 1..9).prop_map(move |writes| Round { revisions, writes })
    })
}

fn rounds() -> impl Strategy<Value = Vec<Round>> {
    prop::collection::vec(round(), 1..5)
}

/// What a case's events are built from: its channels, keys and prior state.
struct Prior {
    channels: [Uuid; CHANNELS],
    anchor: Event,
    deleted: Event,
    /// The prior state's events, each with the index of its author in `keys`.
    events: Vec<(usize, Event)>,
    ds: Vec<Uuid>,
}

fn prior(keys: &[Keys; 3]) -> Prior {
    let channels = [(); CHANNELS].map(|()| Uuid::new_v4());
    let admin = &keys[0];
    let mut events = Vec::new();
    for (i, visibility) in ["open", "open", "private", "open"].into_iter().enumerate() {
        events.push((0, create_channel(admin, channels[i], "c", visibility)));
    }
    events.push((0, admin.sign_new(9002, vec![tag("h", channels[3]), tag("archived", "true")], "")));
    let anchor = keys[1].sign_new(9, vec![tag("h", channels[0])], "anchor");
    let deleted = keys[1].sign_new(9, vec![tag("h", channels[0])], "deleted");
    let deletion = keys[1].sign_new(5, vec![tag("e", &deleted.id)], "");
    events.extend([(1, anchor.clone()), (1, deleted.clone()), (1, deletion)]);
    let ds: Vec<Uuid> = (0..ARTIFACTS + 2).map(|_| Uuid::new_v4()).collect();
    for d in &ds[..ARTIFACTS] {
        events.push((1, revision_event(&keys[1], "create", *d, channels[0], None)));
    }
    Prior { channels, anchor, deleted, events, ds }
}

fn revision_event(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&str>) -> Event {
    let mut tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", "buzz.task"), tag("op", op)];
    if op != "delete" {
        tags.push(tag("title", "a task"));
    }
    if let Some(p) = prev {
        tags.push(tag("prev", p));
    }
    keys.sign_new(45010, tags, &Uuid::new_v4().to_string())
}

fn hex_id() -> String {
    format!("{:032x}{:032x}", Uuid::new_v4().as_u128(), Uuid::new_v4().as_u128())
}

/// One write, the same for both paths but for its community.
#[derive(Clone)]
struct Write {
    actor: Actor,
    event: Event,
}

/// The events of the rounds, built in order (a revision's `prev` follows what was generated
/// before it).
fn materialize(rounds: &[Round], prior: &Prior, keys: &[Keys; 3]) -> Vec<Vec<Write>> {
    let mut latest: Vec<Option<String>> = vec![None; prior.ds.len()];
    let mut first = latest.clone();
    for (_, e) in &prior.events {
        if e.kind == 45010 {
            let d = prior.ds.iter().position(|d| e.tags.iter().any(|t| t[0] == "d" && t[1] == d.to_string()));
            let d = d.unwrap();
            (latest[d], first[d]) = (Some(e.id.to_string()), Some(e.id.to_string()));
        }
    }
    let mut home: Vec<Uuid> = vec![prior.channels[0]; prior.ds.len()];
    let (mut posts, mut revisions): (Vec<Event>, Vec<Event>) = (Vec::new(), Vec::new());
    let mut out = Vec::new();
    for round in rounds {
        let mut batch = Vec::new();
        for (spec, writer) in &round.writes {
            let event = match spec {
                Spec::Copy(n) => {
                    let earlier = if round.revisions { &revisions } else { &posts };
                    match earlier.len() {
                        0 => continue,
                        len => earlier[n % len].clone(),
                    }
                }
                Spec::Post { root: 3, .. } => prior.deleted.clone(),
                Spec::Post { author, channel, root, mention } => {
                    let h = prior.channels.get(*channel).copied().unwrap_or_else(Uuid::new_v4);
                    let mut tags = vec![tag("h", h)];
                    match root {
                        1 => tags.push(vec![
                            "e".into(),
                            prior.anchor.id.to_string(),
                            String::new(),
                            "root".into(),
                        ]),
                        2 => tags.push(vec!["e".into(), hex_id(), String::new(), "root".into()]),
                        _ => {}
                    }
                    if *mention {
                        tags.push(tag("p", keys[(author + 1) % 3].public_hex()));
                    }
                    keys[*author].sign_new(9, tags, &Uuid::new_v4().to_string())
                }
                Spec::Revision { author, artifact, op, prev, h } => {
                    let op_name = ["create", "update", "move", "delete", "restore"][*op];
                    let h = match h {
                        0 if op_name == "move" => prior.channels[1],
                        0 => home[*artifact],
                        c => prior.channels[c - 1],
                    };
                    let prev = match prev {
                        Prev::None => None,
                        Prev::Latest => latest[*artifact].clone(),
                        Prev::First => first[*artifact].clone(),
                        Prev::Unknown => Some(hex_id()),
                    };
                    let e = revision_event(&keys[*author], op_name, prior.ds[*artifact], h, prev.as_deref());
                    latest[*artifact] = Some(e.id.to_string());
                    first[*artifact].get_or_insert_with(|| e.id.to_string());
                    if op_name == "move" {
                        home[*artifact] = h;
                    }
                    e
                }
            };
            if round.revisions {
                revisions.push(event.clone());
            } else {
                posts.push(event.clone());
            }
            let author = Actor::session(event.pubkey.clone());
            let actor = match writer {
                Writer::Author => author,
                Writer::ReadOnly => Actor { scopes: vec![Scope::MessagesRead], ..author },
                Writer::Restricted => {
                    Actor { channel_ids: Some(vec![buzz_core::ChannelId(prior.channels[2])]), ..author }
                }
                Writer::Other => {
                    let other = keys.iter().find(|k| k.pubkey() != event.pubkey).unwrap();
                    Actor::session(other.pubkey())
                }
            };
            batch.push(Write { actor, event });
        }
        out.push(batch);
    }
    out
}

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
        let r = buzz_write::events::write_event(&cluster.pool, community.id, &actor, e.clone(), &relay).await;
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
            let alone =
                buzz_write::events::write_event(pool, single, &w.actor, w.event.clone(), &relay_signer).await;
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
