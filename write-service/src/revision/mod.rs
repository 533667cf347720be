//! NIP-AR revisions (kind 45010) and moves: identity, compare-and-swap, moves, delete and
//! restore, mentions. The rules are `rules::revision`'s. Both paths, one revision at a time
//! (`single.rs`, with its statements) and group commit (`batch.rs`, its statements in `sql.rs`
//! with the artifact row both read), gather the rules' views and apply them in this order, the
//! one order of the revision checks:
//!
//! 1. Admission (the engine, `rules::admission`), as for every kind: an already accepted event id
//!    (stored, or a revision whose event retention removed) is `OK true` (`duplicate:`) whatever
//!    has happened since and whatever the sender may still read, since it tells nothing newer;
//!    then community membership. The envelope is validated without I/O
//!    (`rules::revision::envelope`).
//! 2. Access, exactly the kind-9 check at the kind-9 point: write in the channel the revision names
//!    (`h`, a move's destination), before anything about the artifact is looked at, so a sender
//!    who could not post a kind 9 there gets the kind-9 answer whatever the artifact's state.
//! 3. Identity and CAS under the artifact row lock: a create claims `(community, d)` (a taken d is
//!    a conflict, deleted ones included); any other op locks the row `FOR UPDATE` (an unknown d is
//!    answered as a stale prev). A revision id accepted meanwhile (a concurrent resubmission) is
//!    `duplicate:`. When the artifact lives in another channel than `h` (a move's source, or an
//!    update naming the wrong h), the kind-9 check runs there too, before `prev` is compared with
//!    the current revision.
//! 4. Rules that describe the stored artifact (deleted, type, home, root), now that the sender
//!    is known to be able to write where it lives.
//! 5. Store the revision in `events` (channel = its `h`), advance the artifact and its
//!    current-tag index (`artifact_current_tags`), record the revision id forever, mention only
//!    the `p` keys the previous revision did not carry, and for a move store the relay-signed
//!    kind-45011 removal in the source.
//!
//! Timestamps never decide anything here.
//!
//! Group commit takes creates and updates through these steps for the whole batch at once, and
//! hands back to be written alone, after its commit (so they see it), what it does not decide
//! itself: moves, deletes and restores; an update naming another channel than the artifact's
//! home (the home's write check of step 3 comes first there); a create that lost its claim (a
//! taken identity or a concurrent resubmission); a create whose root is not an anchor (the
//! claim's answer comes first there); a second revision of one artifact, or the same event twice,
//! in one batch. Its statements, besides the engine's view: the updated artifacts locked in key
//! order; the creates claimed in key order with the resubmission check of the updates; the events
//! with their tag rows; the artifacts advanced, their current-tag rows replaced and the revisions
//! recorded in one statement; mentions only for revisions that add some.
//!
//! `retention.rs` removes old, no longer current revision events.

pub mod batch;
pub mod retention;
pub mod single;
pub mod sql;

/// Kind 45010, registered for the one-event transaction and for group commit.
pub struct Revisions;
