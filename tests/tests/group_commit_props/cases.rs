//! The generated cases of `group_commit_props`: rounds of writes (posts and NIP-AR revisions,
//! their writers) over a prior state, and the events they become.

use buzz_bus::{Actor, Scope};
use buzz_core::{Event, Keys};
use buzz_tests::client::create_channel;
use buzz_tests::helpers::tag;
use proptest::prelude::*;
use uuid::Uuid;

/// Channels of the prior state: open, other (open), private (the admin's), archived.
pub(super) const CHANNELS: usize = 4;
/// Artifacts created in the prior state; generated revisions also name two new ones.
pub(super) const ARTIFACTS: usize = 3;

/// Who sends a write.
#[derive(Debug, Clone, Copy)]
pub(super) enum Writer {
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
pub(super) enum Prev {
    None,
    /// The last revision generated for this artifact (accepted or not).
    Latest,
    /// The artifact's first revision.
    First,
    Unknown,
}

#[derive(Debug, Clone)]
pub(super) enum Spec {
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
pub(super) struct Round {
    pub(super) revisions: bool,
    pub(super) writes: Vec<(Spec, Writer)>,
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

pub(super) fn rounds() -> impl Strategy<Value = Vec<Round>> {
    prop::collection::vec(round(), 1..5)
}

/// What a case's events are built from: its channels, keys and prior state.
pub(super) struct Prior {
    pub(super) channels: [Uuid; CHANNELS],
    pub(super) anchor: Event,
    pub(super) deleted: Event,
    /// The prior state's events, each with the index of its author in `keys`.
    pub(super) events: Vec<(usize, Event)>,
    pub(super) ds: Vec<Uuid>,
}

pub(super) fn prior(keys: &[Keys; 3]) -> Prior {
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

pub(super) fn revision_event(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&str>) -> Event {
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
pub(super) struct Write {
    pub(super) actor: Actor,
    pub(super) event: Event,
}

/// The events of the rounds, built in order (a revision's `prev` follows what was generated
/// before it).
pub(super) fn materialize(rounds: &[Round], prior: &Prior, keys: &[Keys; 3]) -> Vec<Vec<Write>> {
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
