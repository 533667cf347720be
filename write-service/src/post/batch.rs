//! Group commit of kind-9 posts: the [`Batch`] steps of the engine's one transaction. The
//! decision of each post is the one-post path's: the same rules (`rules::admission`, then
//! `rules::post`) applied to the batch's view of it. A refused post is answered on its own and its
//! batch-mates go on; a duplicate is handed back (it may need announcing again).
//!
//! Statements per batch, besides the engine's view: the events with their tag rows, the mentions
//! (only when a post has `p` tags), the authors' read markers (last, sorted, so concurrent batches
//! lock them in the same order and hold them only until their commit).

use std::collections::HashSet;

use buzz_core::{CommunityId, Event, EventId};
use buzz_store::access::Channel;
use sqlx::PgConnection;

use crate::engine::{Batch, Outcome, Write};
use crate::post::sql::{self, StoredPost};
use crate::post::Posts;
use crate::rules::post::{self, Named};
use crate::rules::Refusal;
use crate::store::{self, NewEvent, View};

impl Batch for Posts {
    const NAME: &'static str = "posts";
    type Parsed = ();

    fn parse(event: &Event) -> (Named, ()) {
        (Named::parse(event), ())
    }

    async fn write<'a>(
        tx: &'a mut PgConnection,
        writes: Vec<Write<'a, ()>>,
    ) -> Result<Vec<Outcome>, sqlx::Error> {
        let mut seen = HashSet::new();
        let mut posts: Vec<Decided<'a>> = writes.into_iter().map(|w| decide(w, &mut seen)).collect();
        let events: Vec<NewEvent<'_>> = posts
            .iter()
            .filter_map(|p| match &p.decision {
                Decision::Store { channel, root, .. } => Some(NewEvent {
                    community: p.community,
                    event: p.event,
                    channel,
                    thread_root: root.as_ref(),
                }),
                _ => None,
            })
            .collect();
        if events.is_empty() {
            return Ok(posts.into_iter().map(Decided::outcome).collect());
        }
        let seqs = store::insert_events(tx, &events).await?;
        drop(events);
        for p in &mut posts {
            if let Decision::Store { seq, .. } = &mut p.decision {
                *seq = seqs.get(&(p.community, p.event.id.clone())).copied();
            }
        }
        let stored: Vec<StoredPost<'_>> = posts.iter().filter_map(Decided::stored).collect();
        sql::record_mentions(tx, &stored).await?;
        sql::advance_markers(tx, &stored).await?;
        drop(stored);
        Ok(posts.into_iter().map(Decided::outcome).collect())
    }
}

/// One post of a batch: what the batch read about it, and what the rules decided.
struct Decided<'a> {
    community: CommunityId,
    event: &'a Event,
    view: View,
    decision: Decision,
}

/// What the rules decided for a post of the batch.
enum Decision {
    Refused(Refusal),
    Duplicate,
    /// Accepted, to store in `channel` with `root`; `seq` once stored (`None` after the insert:
    /// stored meanwhile by a concurrent write, a duplicate as on the one-post path).
    Store {
        channel: Channel,
        root: Option<EventId>,
        seq: Option<i64>,
    },
}

impl<'a> Decided<'a> {
    fn stored(&self) -> Option<StoredPost<'a>> {
        let Decision::Store { channel, seq: Some(seq), .. } = &self.decision else { return None };
        Some(StoredPost { community: self.community, event: self.event, channel: channel.id, seq: *seq })
    }

    fn outcome(self) -> Outcome {
        match self.decision {
            Decision::Refused(r) => Outcome::Refused(r),
            // Answered by the one-post path, which announces a recent one again.
            Decision::Duplicate | Decision::Store { seq: None, .. } => Outcome::Alone,
            Decision::Store { channel, seq: Some(seq), .. } => {
                Outcome::Stored { channel, seq, view: self.view, replaced: Vec::new() }
            }
        }
    }
}

/// The kind-9 decision (`rules::post`) from the batch's view; a post submitted twice in one batch
/// (`seen` holds the (community, id) of those stored before it) is stored once, and its copy is a
/// duplicate as an already stored event is on the one-post path: after admission's earlier checks,
/// before the write rule (a copy through a token that may not write there is still `duplicate:`).
fn decide<'a>(w: Write<'a, ()>, seen: &mut HashSet<(CommunityId, &'a str)>) -> Decided<'a> {
    let decision = match w.admitted {
        Err(r) => Decision::Refused(r),
        Ok(None) => Decision::Duplicate,
        Ok(Some(_)) if seen.contains(&(w.community, w.event.id.as_str())) => Decision::Duplicate,
        Ok(Some(at)) => match post::decide(w.named, at, w.view.anchor, w.actor) {
            Err(r) => Decision::Refused(r),
            Ok((channel, root)) => {
                seen.insert((w.community, w.event.id.as_str()));
                Decision::Store { channel, root, seq: None }
            }
        },
    };
    Decided { community: w.community, event: w.event, view: w.view, decision }
}
