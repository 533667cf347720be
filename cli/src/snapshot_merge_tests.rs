//! Verification of constructed bodies and reconciliation rules.

#![allow(clippy::unwrap_used)]

use buzz_core::{Event, Keys};
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
        tags.push(vec!["prev".into(), p.id.clone()]);
    }
    keys.sign_new(45010, tags, "{}")
}

fn entry(ev: &Event) -> Entry {
    Entry { artifact: D.into(), revision: ev.id.clone(), channel: H.into() }
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
    check(&note, &Entry { revision: note.id.clone(), ..entry(&ev) }, "kind 1");
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
    r.live(v2.clone());
    assert_eq!(r.into_current(), vec![v3.clone()]);
    // The capture holds v1; a live v2 (received after capture) wins.
    let mut r = Reconciler::new(preds.clone());
    r.captured(v1.clone());
    r.live(v2.clone());
    assert_eq!(r.into_current(), vec![v2.clone()]);
    // A live update moving it out of project a removes it; a later stale live event does not
    // bring it back.
    let out = rev(&keys, "update", H, Some(&v2), "b");
    let mut r = Reconciler::new(preds.clone());
    r.captured(v2.clone());
    r.live(out);
    r.live(v1.clone());
    assert!(r.into_current().is_empty());
    // A deletion removes; a deletion of something never held inserts nothing.
    let del = rev(&keys, "delete", H, Some(&v2), "a");
    let mut r = Reconciler::new(preds.clone());
    r.live(del);
    assert!(r.into_current().is_empty());
}

#[test]
fn local_records_absent_from_the_capture_are_kept_and_removals_apply_only_to_the_held_revision() {
    let keys = Keys::generate();
    let preds = Predicates::of(&json!({"artifact": "current"}));
    let local = rev(&keys, "create", H, None, "a");
    let mut r = Reconciler::new(preds.clone());
    r.local(local.clone());
    assert_eq!(r.into_current(), vec![local.clone()]);
    let relay = Keys::generate();
    let removal = |e: &str| {
        relay.sign_new(
            45011,
            vec![vec!["d".into(), D.into()], vec!["h".into(), H.into()], vec!["e".into(), e.into()]],
            "",
        )
    };
    let mut r = Reconciler::new(preds.clone());
    r.captured(local.clone());
    r.live(removal(&"0".repeat(64)));
    assert_eq!(r.into_current().len(), 1, "a removal naming another revision is ignored");
    let mut r = Reconciler::new(preds);
    r.captured(local.clone());
    r.live(removal(&local.id));
    assert!(r.into_current().is_empty());
}
