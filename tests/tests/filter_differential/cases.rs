//! The generated cases of `filter_differential`: posts, artifacts and filters as indexes into a
//! world's keys, channels and tag pools (the world itself is built by the test).

use proptest::prelude::*;

/// Seconds the worlds' `created_at` span (so `since`/`until` and ties between events matter).
pub(super) const SPAN: i64 = 20;

/// Tag names a generated event or filter uses; each has a pool of values ([`World::pool`]).
pub(super) const TAG_NAMES: [&str; 5] = ["h", "e", "p", "d", "t"];

/// A generated tag: (index into `TAG_NAMES`, index into that name's pool).
pub(super) type Tag = (usize, usize);

#[derive(Debug, Clone)]
pub(super) struct PostSpec {
    /// Author: 0 owner, 1 reader, 2 another member.
    pub(super) author: usize,
    /// Channel: 0, 1 open; 2 private (the reader's); 3 private (the owner's, unreadable).
    pub(super) channel: usize,
    pub(super) at: i64,
    /// Extra tags: (index into `TAG_NAMES`, index into that name's pool).
    pub(super) tags: Vec<(usize, usize)>,
}

#[derive(Debug, Clone)]
pub(super) struct ArtifactSpec {
    pub(super) author: usize,
    /// Home: a channel index as for posts.
    pub(super) home: usize,
    /// `created_at` of the create, then of each update.
    pub(super) at: Vec<i64>,
    /// Client tags (`e`, `p`, `t` only: `d` and `h` are the envelope's) of each revision.
    pub(super) tags: Vec<Vec<(usize, usize)>>,
    /// Then moved to channel 1 (only from channel 0, where every author writes).
    pub(super) moved: bool,
    pub(super) deleted: bool,
}

#[derive(Debug, Clone)]
pub(super) struct FilterSpec {
    /// Indexes into the stored ids (one past the end: an unknown id).
    pub(super) ids: Option<Vec<usize>>,
    /// The first id sent as a 10-character prefix instead.
    pub(super) prefix: bool,
    /// 0..3 the three authors, 3 the relay, 4 a stranger.
    pub(super) authors: Option<Vec<usize>>,
    pub(super) kinds: Option<Vec<u32>>,
    pub(super) tags: Vec<(usize, Vec<usize>)>,
    pub(super) since: Option<i64>,
    pub(super) until: Option<i64>,
    pub(super) limit: Option<u32>,
}

#[derive(Debug, Clone)]
pub(super) struct Case {
    pub(super) posts: Vec<PostSpec>,
    pub(super) artifacts: Vec<ArtifactSpec>,
    pub(super) reqs: Vec<Vec<FilterSpec>>,
}

fn tags_of(names: &'static [usize]) -> impl Strategy<Value = Vec<(usize, usize)>> {
    prop::collection::vec((prop::sample::select(names), 0..6usize), 0..4)
}

fn post() -> impl Strategy<Value = PostSpec> {
    (0..3usize, 0..4usize, 0..SPAN, tags_of(&[0, 1, 2, 3, 4])).prop_map(|(author, channel, at, tags)| {
        // Only the reader writes in its private channel, only the owner in theirs.
        let author = match channel {
            2 => 1,
            3 => 0,
            _ => author,
        };
        PostSpec { author, channel, at, tags }
    })
}

fn artifact() -> impl Strategy<Value = ArtifactSpec> {
    (
        0..3usize,
        0..4usize,
        prop::collection::vec((0..SPAN, tags_of(&[1, 2, 4])), 1..4),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(author, home, revisions, moved, deleted)| {
            let author = match home {
                2 => 1,
                3 => 0,
                _ => author,
            };
            let (at, tags) = revisions.into_iter().unzip();
            ArtifactSpec { author, home, at, tags, moved: moved && home == 0, deleted }
        })
}

fn filter() -> impl Strategy<Value = FilterSpec> {
    use prop::option::weighted;
    let kinds: &'static [u32] = &[9, 45010, 45011, 9007, 39000, 1];
    (
        weighted(0.2, prop::collection::vec(0..64usize, 0..4)),
        prop::bool::weighted(0.05),
        weighted(0.3, prop::collection::vec(0..5usize, 0..3)),
        weighted(0.5, prop::collection::vec(prop::sample::select(kinds), 0..3)),
        prop::collection::vec((0..TAG_NAMES.len(), prop::collection::vec(0..6usize, 0..3)), 0..3),
        weighted(0.3, -2..SPAN + 2),
        weighted(0.3, -2..SPAN + 2),
        weighted(0.4, 0..12u32),
    )
        .prop_map(|(ids, prefix, authors, kinds, tags, since, until, limit)| FilterSpec {
            prefix: prefix && ids.as_ref().is_some_and(|i| !i.is_empty()),
            ids,
            authors,
            kinds,
            tags,
            since,
            until,
            limit,
        })
}

pub(super) fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(post(), 0..24),
        prop::collection::vec(artifact(), 0..4),
        prop::collection::vec(prop::collection::vec(filter(), 1..3), 6),
    )
        .prop_map(|(posts, artifacts, reqs)| Case { posts, artifacts, reqs })
}
