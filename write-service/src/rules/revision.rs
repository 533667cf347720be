//! NIP-AR revisions (kind 45010): the envelope, then, once admitted and writable in `h`, identity
//! and compare-and-swap under the artifact row lock (with the resubmission of an accepted
//! revision), the write rule in the artifact's home when it lives elsewhere, the transition rules
//! (moves, delete and restore, the type) and the root rule, each applied at its step of the order
//! `revision/mod.rs` documents. Timestamps never decide anything.

use buzz_core::nipar::{self, Envelope, Op};
use buzz_core::{ChannelId, Event, EventId};

use super::Refusal;

/// The envelope of a kind-45010 event, validated without I/O (`buzz_core::nipar::parse`): a
/// malformed one is refused with its reason.
pub fn envelope(event: &Event) -> Result<Envelope, Refusal> {
    nipar::parse(event).map_err(Refusal::Envelope)
}

/// An artifact's current state, as its locked row says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Current<'a> {
    /// The artifact type (immutable).
    pub type_name: &'a str,
    /// Id of the current revision.
    pub revision: &'a EventId,
    /// The channel the artifact lives in.
    pub home: ChannelId,
    /// The root anchor, when it has one.
    pub root: Option<&'a EventId>,
    /// The current revision is a delete.
    pub deleted: bool,
}

/// What the database says about the artifact a revision names, under its row lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArtifactView<'a> {
    /// A create claimed its `d` (it was free).
    pub claimed: bool,
    /// The locked artifact (any op but a create that claimed its `d`); `None`: no such `d`.
    pub current: Option<Current<'a>>,
    /// This revision id was accepted meanwhile (a concurrent resubmission committed first).
    pub accepted: bool,
}

/// What the artifact row says about a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity<'a> {
    /// This exact revision was accepted before: `duplicate:`.
    Duplicate,
    /// A create that claimed its `d`.
    Created,
    /// Any other op: the locked artifact.
    Existing(Current<'a>),
}

/// Identity: a create claims its `d` (a taken one, deleted ones included, is a conflict unless
/// this very revision took it); any other op names an existing artifact (an unknown `d` has no
/// current revision to name: the stale-prev answer), unless this revision was accepted meanwhile.
pub fn identity<'a>(env: &Envelope, view: &ArtifactView<'a>) -> Result<Identity<'a>, Refusal> {
    if env.op == Op::Create {
        return match (view.claimed, view.accepted) {
            (true, _) => Ok(Identity::Created),
            (false, true) => Ok(Identity::Duplicate),
            (false, false) => Err(Refusal::IdentityTaken),
        };
    }
    let current = view.current.ok_or(Refusal::UnknownArtifact)?;
    Ok(if view.accepted { Identity::Duplicate } else { Identity::Existing(current) })
}

/// The other channel the sender must be able to write in before the artifact's state is
/// answered: its home, when the revision names another `h` (a move's source, or an update naming
/// the wrong `h`).
#[must_use]
pub fn source(env: &Envelope, current: &Current<'_>) -> Option<ChannelId> {
    (current.home != env.h).then_some(current.home)
}

/// The root whose anchor-ness decides the root rule: on creation, on a move, or when changed,
/// root must be a conversation anchor in `h` (a move's destination); an unchanged root may have
/// lost its anchor since.
#[must_use]
pub fn anchor_needed<'e>(env: &'e Envelope, current: Option<&Current<'_>>) -> Option<&'e EventId> {
    let root = env.root.as_ref()?;
    let unchanged = current.is_some_and(|row| row.root == Some(root));
    (env.op == Op::Move || !unchanged).then_some(root)
}

/// The root rule, `anchor` telling whether [`anchor_needed`]'s root is an anchor in `h`.
pub fn root(env: &Envelope, current: Option<&Current<'_>>, anchor: bool) -> Result<(), Refusal> {
    if anchor_needed(env, current).is_none() || anchor {
        return Ok(());
    }
    Err(if env.op == Op::Move { Refusal::MoveRootNotAnchor } else { Refusal::RootNotAnchor })
}

/// Rules between the current revision and the next one, checked once the sender may write in the
/// artifact's home (so they reveal nothing the sender cannot read).
pub fn transition(env: &Envelope, current: &Current<'_>) -> Result<(), Refusal> {
    match (current.deleted, env.op) {
        (true, Op::Restore) | (false, Op::Create | Op::Update | Op::Move | Op::Delete) => {}
        (true, _) => return Err(Refusal::Deleted),
        (false, Op::Restore) => return Err(Refusal::NotDeleted),
    }
    if env.type_name != current.type_name {
        return Err(Refusal::TypeImmutable);
    }
    match env.op {
        Op::Move if env.h == current.home => Err(Refusal::MoveKeepsHome),
        Op::Move => Ok(()),
        _ if env.h != current.home => Err(Refusal::UpdateLeavesHome),
        Op::Delete if env.root.as_ref() != current.root => Err(Refusal::DeletionChangesRoot),
        _ => Ok(()),
    }
}

/// What a revision must pass once its identity is known and the sender may write where the
/// artifact lives, in order: `prev` names the current revision (compare-and-swap), the transition
/// rules, the root rule.
pub fn advance(env: &Envelope, current: Option<&Current<'_>>, anchor: bool) -> Result<(), Refusal> {
    if let Some(row) = current {
        if env.prev.as_deref() != Some(row.revision) {
            return Err(Refusal::StalePrev);
        }
        transition(env, row)?;
    }
    root(env, current, anchor)
}

#[cfg(test)]
mod tests;
