//! Verification of constructed bodies and reconciliation rules.

#![allow(clippy::unwrap_used)]

use buzz_core::{Event, Keys, UnsignedEvent};
use serde_json::json;

use super::*;

const D: &str = "04737c81-e5e8-4412-bb47-f446813cfeba";
const H: &str = "9b353519-f4fe-4757-aef4-bec6cc0ae54c";

fn rev(keys: &Keys, op: &str, h: &str, prev: Option<&Event>, project: &str) -> Event {
    let mut tags = vec![
        vec!["ar".into(), "1".into()],
        vec!["d".into(), D.into()],
        vec!["h".into(), h.into()],
        vec!["type".into(), "buzz.task".into()],
        vec!["op".into(), op.into()],
        vec!["project".into(), project.into()],
    ];
    if let Some(p) = prev {
        tags.push(vec!["prev".into(), p.id.to_string()]);
    }
    keys.sign_new(45010, tags, "{}")
}

/// `rev` with an explicit `created_at`.
fn rev_at(keys: &Keys, op: &str, prev: Option<&Event>, created_at: i64) -> Event {
    let ev = rev(keys, op, H, prev, "a");
    keys.sign(UnsignedEvent {
        pubkey: ev.pubkey.to_string(),
        created_at,
        kind: ev.kind,
        tags: ev.tags,
        content: ev.content,
    })
}

fn entry(ev: &Event) -> Entry {
    Entry { artifact: D.into(), revision: ev.id.to_string(), channel: H.into() }
}

#[test]
fn a_body_matching_its_entry_with_a_valid_signature_is_accepted() {
    let ev = rev(&Keys::generate(), "create", H, None, "a");
    verify_body(&ev, &entry(&ev)).unwrap();
}

#[test]
fn tampered_bodies_and_bodies_that_do_not_match_the_manifest_are_refused() {
    let keys = Keys::generate();
    let ev = rev(&keys, "create", H, None, "a");
    let check = |body: &Event, e: &Entry, want: &str| {
        let err = verify_body(body, e).unwrap_err().to_string();
        assert!(err.starts_with("verification: ") && err.contains(want), "{err} lacks {want}");
    };
    // A signature from another key over the same id.
    let mut forged = ev.clone();
    forged.sig = rev(&Keys::generate(), "create", H, None, "a").sig;
    check(&forged, &entry(&ev), "bad signature");
    // Content changed after signing: the id no longer matches.
    let mut edited = ev.clone();
    edited.content = "{\"status\":\"done\"}".into();
    check(&edited, &entry(&ev), "event id does not match");
    // Another revision than the manifest names.
    let other = rev(&keys, "create", H, None, "b");
    check(&other, &entry(&ev), "body has id");
    // Right revision, wrong artifact or channel in the manifest.
    check(&ev, &Entry { artifact: "00000000-0000-4000-8000-000000000001".into(), ..entry(&ev) }, "d tag");
    check(&ev, &Entry { channel: "00000000-0000-4000-8000-000000000002".into(), ..entry(&ev) }, "h tag");
    // A well-signed event of another kind.
    let note = keys.sign_new(1, ev.tags.clone(), "");
    check(&note, &Entry { revision: note.id.to_string(), ..entry(&ev) }, "kind 1");
}

#[test]
fn newer_revisions_win_by_chain_and_deletions_or_non_matching_live_revisions_remove() {
    let keys = Keys::generate();
    let preds = Predicates::of(&json!({"artifact": "current", "#project": ["a"]}));
    let v1 = rev(&keys, "create", H, None, "a");
    let v2 = rev(&keys, "update", H, Some(&v1), "a");
    let v3 = rev(&keys, "update", H, Some(&v2), "a");
    // Live v2 then v3 arrive; the capture holds v3 already: the older live events do not win.
    let mut r = Reconciler::new(preds.clone());
    r.captured(v3.clone());
    r.after_capture(v2.clone());
    assert_eq!(r.into_current().unwrap(), vec![v3.clone()]);
    // The capture holds v1; a live v2 (received after capture) wins.
    let mut r = Reconciler::new(preds.clone());
    r.captured(v1.clone());
    r.after_capture(v2.clone());
    assert_eq!(r.into_current().unwrap(), vec![v2.clone()]);
    // A live update moving it out of project a removes it; a later stale live event does not
    // bring it back.
    let out = rev(&keys, "update", H, Some(&v2), "b");
    let mut r = Reconciler::new(preds.clone());
    r.captured(v2.clone());
    r.after_capture(out);
    r.after_capture(v1.clone());
    assert!(r.into_current().unwrap().is_empty());
    // A deletion removes; a deletion of something never held inserts nothing.
    let del = rev(&keys, "delete", H, Some(&v2), "a");
    let mut r = Reconciler::new(preds);
    r.after_capture(del);
    assert!(r.into_current().unwrap().is_empty());
}

#[test]
fn local_writes_after_the_boundary_are_kept_and_those_before_it_follow_the_capture() {
    let keys = Keys::generate();
    let preds = Predicates::of(&json!({"artifact": "current"}));
    let local = rev(&keys, "create", H, None, "a");
    // Acknowledged after `start` was sent and absent from the capture: kept.
    let mut r = Reconciler::new(preds.clone());
    r.after_capture(local.clone());
    assert_eq!(r.into_current().unwrap(), vec![local.clone()]);
    // Acknowledged before `start` was sent and absent from the capture: someone else deleted or
    // moved it meanwhile, so it does not come back.
    let mut r = Reconciler::new(preds.clone());
    r.before_capture(&local);
    assert!(r.into_current().unwrap().is_empty());
    // Acknowledged before `start`, and the capture holds another revision of it whose chain the
    // client does not hold: the capture reflects the write, so the captured revision stands
    // (without asking, and whatever the timestamps say).
    let other = Keys::generate();
    let unseen = rev(&other, "update", H, Some(&local), "a");
    let captured = rev_at(&other, "update", Some(&unseen), local.created_at - 3600);
    let mut r = Reconciler::new(preds.clone());
    r.captured(captured.clone());
    r.before_capture(&local);
    assert!(r.unresolved().is_empty());
    assert_eq!(r.into_current().unwrap(), vec![captured.clone()]);
    // A live event received before `start` lends its prev link: a later local write on top of
    // it is ordered after the captured revision.
    let mut r = Reconciler::new(preds);
    let mine = rev(&keys, "update", H, Some(&captured), "a");
    r.captured(captured.clone());
    r.before_capture(&unseen);
    r.after_capture(mine.clone());
    assert_eq!(r.into_current().unwrap(), vec![mine]);
}

#[test]
fn timestamps_never_choose_an_unknown_order_is_asked_of_the_relay() {
    let keys = Keys::generate();
    let preds = Predicates::of(&json!({"artifact": "current"}));
    let v1 = rev_at(&keys, "create", None, 1_000_000);
    let v2 = rev_at(&keys, "update", Some(&v1), 1_000_100);
    // v3 follows v2, which the client never saw, and claims an older created_at than v1.
    let v3 = rev_at(&keys, "update", Some(&v2), 999_000);
    // An earlier-looking v0 that is not in v1's chain at all, claiming a later created_at.
    let v0 = rev_at(&keys, "create", None, 2_000_000);
    for (cand, answer) in [(&v3, Some(&v3)), (&v0, Some(&v1)), (&v3, None)] {
        let mut r = Reconciler::new(preds.clone());
        r.captured(v1.clone());
        r.after_capture(cand.clone());
        assert_eq!(r.unresolved(), vec![D.to_owned()], "the chain cannot order them");
        assert_eq!(r.into_current().unwrap_err(), vec![D.to_owned()], "nothing is chosen unasked");
        let mut r = Reconciler::new(preds.clone());
        r.captured(v1.clone());
        r.after_capture(cand.clone());
        r.resolve(D, answer.cloned());
        assert_eq!(r.into_current().unwrap(), answer.into_iter().cloned().collect::<Vec<_>>());
    }
    // Once the missing link is held (v2 received live), the chain decides without asking.
    let mut r = Reconciler::new(preds);
    r.captured(v1.clone());
    r.after_capture(v3.clone());
    r.after_capture(v2.clone());
    assert!(r.unresolved().is_empty());
    assert_eq!(r.into_current().unwrap(), vec![v3]);
}

#[test]
fn removals_apply_to_the_held_revision_are_stale_for_its_ancestors_and_otherwise_asked() {
    let keys = Keys::generate();
    let preds = Predicates::of(&json!({"artifact": "current"}));
    let v1 = rev(&keys, "create", H, None, "a");
    let v2 = rev(&keys, "update", H, Some(&v1), "a");
    let relay = Keys::generate();
    let removal = |e: &str| {
        relay.sign_new(
            45011,
            vec![vec!["d".into(), D.into()], vec!["h".into(), H.into()], vec!["e".into(), e.into()]],
            "",
        )
    };
    let run = |captured: &Event, e: &str| {
        let mut r = Reconciler::new(preds.clone());
        r.captured(captured.clone());
        r.after_capture(removal(e));
        r
    };
    assert!(run(&v2, &v2.id).into_current().unwrap().is_empty(), "a removal of the held revision");
    assert_eq!(run(&v2, &v1.id).into_current().unwrap(), vec![v2.clone()], "a removal of an ancestor");
    let unknown = run(&v2, &"0".repeat(64));
    assert_eq!(unknown.unresolved(), vec![D.to_owned()], "a removal of a revision not in the held chain");
    // A removal received before `start` is reflected in the capture.
    let mut r = Reconciler::new(preds);
    r.captured(v2.clone());
    r.before_capture(&removal(&v2.id));
    assert_eq!(r.into_current().unwrap(), vec![v2]);
}
