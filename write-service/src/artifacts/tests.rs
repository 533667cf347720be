//! The rules between an artifact's current revision and the next one (`check_transition`).

use buzz_core::nipar::{Envelope, Op};
use uuid::Uuid;

use super::{check_transition, Artifact, DELETED};

const HOME: Uuid = Uuid::from_u128(1);
const ELSEWHERE: Uuid = Uuid::from_u128(2);

fn current(deleted: bool) -> Artifact {
    Artifact {
        type_name: "doc".into(),
        current_revision: "a".repeat(64),
        home_channel: HOME,
        root: Some("b".repeat(64)),
        deleted,
        mentioned: Vec::new(),
    }
}

fn next(op: Op, h: Uuid) -> Envelope {
    Envelope {
        d: Uuid::from_u128(9),
        h,
        type_name: "doc".into(),
        title: (op != Op::Delete).then(|| "t".into()),
        op,
        root: Some("b".repeat(64)),
        prev: Some("a".repeat(64)),
    }
}

fn refusal(env: &Envelope, row: &Artifact) -> String {
    check_transition(env, row).expect_err("refused").message
}

#[test]
fn a_deleted_artifact_accepts_only_restore_and_only_a_deleted_one_is_restored() {
    for op in [Op::Update, Op::Move, Op::Delete] {
        assert_eq!(refusal(&next(op, HOME), &current(true)), DELETED, "{op:?}");
    }
    assert_eq!(check_transition(&next(Op::Restore, HOME), &current(true)), Ok(()));
    assert_eq!(refusal(&next(Op::Restore, HOME), &current(false)), "only a deleted artifact can be restored");
}

#[test]
fn the_type_never_changes() {
    let mut env = next(Op::Update, HOME);
    env.type_name = "sheet".into();
    assert_eq!(refusal(&env, &current(false)), "type is immutable");
}

#[test]
fn only_a_move_changes_h_and_a_move_must_change_it() {
    let live = current(false);
    assert_eq!(check_transition(&next(Op::Update, HOME), &live), Ok(()));
    assert_eq!(check_transition(&next(Op::Move, ELSEWHERE), &live), Ok(()));
    assert_eq!(
        refusal(&next(Op::Update, ELSEWHERE), &live),
        "h must be the artifact's home channel; use op=move to change it"
    );
    assert_eq!(
        refusal(&next(Op::Move, HOME), &live),
        "a move changes h; use op=update to stay in the home channel"
    );
}

#[test]
fn a_deletion_keeps_the_current_root() {
    let live = current(false);
    assert_eq!(check_transition(&next(Op::Delete, HOME), &live), Ok(()));
    let mut env = next(Op::Delete, HOME);
    env.root = None;
    assert_eq!(refusal(&env, &live), "a deletion preserves the current root");
}
