//! Every NIP-AR refusal of [`super`], without a database.

use buzz_core::nipar::{Envelope, Op};
use buzz_core::{ChannelId, EventId};
use uuid::Uuid;

use super::*;

const HOME: ChannelId = ChannelId::from_u128(1);
const ELSEWHERE: ChannelId = ChannelId::from_u128(2);

fn id(c: &str) -> EventId {
    EventId::parse(&c.repeat(64)).unwrap()
}

fn ids() -> (EventId, EventId) {
    (id("a"), id("b"))
}

fn current<'a>(ids: &'a (EventId, EventId), deleted: bool) -> Current<'a> {
    Current { type_name: "doc", revision: &ids.0, home: HOME, root: Some(&ids.1), deleted }
}

fn next(op: Op, h: ChannelId) -> Envelope {
    let (prev, root) = ids();
    Envelope {
        d: Uuid::from_u128(9),
        h,
        type_name: "doc".into(),
        title: (op != Op::Delete).then(|| "t".into()),
        op,
        root: Some(root),
        prev: (op != Op::Create).then_some(prev),
    }
}

#[test]
fn a_deleted_artifact_accepts_only_restore_and_only_a_deleted_one_is_restored() {
    let ids = ids();
    for op in [Op::Update, Op::Move, Op::Delete] {
        assert_eq!(transition(&next(op, HOME), &current(&ids, true)), Err(Refusal::Deleted), "{op:?}");
    }
    assert_eq!(transition(&next(Op::Restore, HOME), &current(&ids, true)), Ok(()));
    assert_eq!(transition(&next(Op::Restore, HOME), &current(&ids, false)), Err(Refusal::NotDeleted));
}

#[test]
fn the_type_never_changes() {
    let ids = ids();
    let mut env = next(Op::Update, HOME);
    env.type_name = "sheet".into();
    assert_eq!(transition(&env, &current(&ids, false)), Err(Refusal::TypeImmutable));
}

#[test]
fn only_a_move_changes_h_and_a_move_must_change_it() {
    let ids = ids();
    let live = current(&ids, false);
    assert_eq!(transition(&next(Op::Update, HOME), &live), Ok(()));
    assert_eq!(transition(&next(Op::Move, ELSEWHERE), &live), Ok(()));
    assert_eq!(transition(&next(Op::Update, ELSEWHERE), &live), Err(Refusal::UpdateLeavesHome));
    assert_eq!(transition(&next(Op::Move, HOME), &live), Err(Refusal::MoveKeepsHome));
    assert_eq!(source(&next(Op::Move, ELSEWHERE), &live), Some(HOME));
    assert_eq!(source(&next(Op::Update, HOME), &live), None);
}

#[test]
fn a_deletion_keeps_the_current_root() {
    let ids = ids();
    let live = current(&ids, false);
    assert_eq!(transition(&next(Op::Delete, HOME), &live), Ok(()));
    let mut env = next(Op::Delete, HOME);
    env.root = None;
    assert_eq!(transition(&env, &live), Err(Refusal::DeletionChangesRoot));
}

#[test]
fn a_create_claims_its_d_unless_this_very_revision_took_it() {
    let create = next(Op::Create, HOME);
    let claimed = ArtifactView { claimed: true, ..ArtifactView::default() };
    assert_eq!(identity(&create, &claimed), Ok(Identity::Created));
    let resubmitted = ArtifactView { accepted: true, ..ArtifactView::default() };
    assert_eq!(identity(&create, &resubmitted), Ok(Identity::Duplicate));
    assert_eq!(identity(&create, &ArtifactView::default()), Err(Refusal::IdentityTaken));
}

#[test]
fn any_other_op_names_an_existing_artifact_unless_accepted_meanwhile() {
    let ids = ids();
    let row = current(&ids, false);
    let update = next(Op::Update, HOME);
    assert_eq!(identity(&update, &ArtifactView::default()), Err(Refusal::UnknownArtifact));
    let locked = ArtifactView { current: Some(row), ..ArtifactView::default() };
    assert_eq!(identity(&update, &locked), Ok(Identity::Existing(row)));
    let resubmitted = ArtifactView { accepted: true, ..locked };
    assert_eq!(identity(&update, &resubmitted), Ok(Identity::Duplicate));
}

#[test]
fn prev_must_name_the_current_revision_before_the_transition_rules() {
    let ids = ids();
    let row = current(&ids, false);
    let mut env = next(Op::Update, ELSEWHERE);
    env.prev = Some(id("c"));
    assert_eq!(advance(&env, Some(&row), true), Err(Refusal::StalePrev));
    env.prev = Some(ids.0.clone());
    assert_eq!(advance(&env, Some(&row), true), Err(Refusal::UpdateLeavesHome));
    assert_eq!(advance(&next(Op::Update, HOME), Some(&row), false), Ok(()), "an unchanged root");
}

#[test]
fn a_created_changed_or_moved_root_must_be_an_anchor_in_h() {
    let ids = ids();
    let row = current(&ids, false);
    let create = next(Op::Create, HOME);
    assert_eq!(anchor_needed(&create, None), Some(&ids.1));
    assert_eq!(advance(&create, None, false), Err(Refusal::RootNotAnchor));
    assert_eq!(advance(&create, None, true), Ok(()));
    let mut changed = next(Op::Update, HOME);
    changed.root = Some(id("e"));
    assert_eq!(advance(&changed, Some(&row), false), Err(Refusal::RootNotAnchor));
    let moved = next(Op::Move, ELSEWHERE);
    assert_eq!(anchor_needed(&moved, Some(&row)), Some(&ids.1), "even unchanged");
    assert_eq!(advance(&moved, Some(&row), false), Err(Refusal::MoveRootNotAnchor));
    let mut rootless = next(Op::Move, ELSEWHERE);
    rootless.root = None;
    assert_eq!(advance(&rootless, Some(&row), false), Ok(()));
}
