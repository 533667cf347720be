//! The judge of [`super`] on synthetic audit lines and revisions.

use std::collections::HashSet;

use super::*;
use crate::distributed::check::db::Stored;
use crate::distributed::check::scope::Scope;
use crate::distributed::check::verdict;

use crate::distributed::audit::test_lines as recs;

fn rev(d: &str, id: &str, op: &str, channel: &str, seq: i64) -> Rev {
    Rev { d: d.into(), id: id.into(), op: op.into(), channel: channel.into(), seq, created_at: 0 }
}

fn scope() -> Scope {
    Scope { open: "open".into(), private: Some("priv".into()), members: HashSet::from(["m".to_owned()]) }
}

/// Artifact A in the open channel (a1, a2, a3), B in the private one (b1, b2), C created last.
fn revs() -> Vec<Rev> {
    vec![
        rev("A", "a1", "create", "open", 10),
        rev("B", "b1", "create", "priv", 11),
        rev("A", "a2", "update", "open", 12),
        rev("B", "b2", "update", "priv", 13),
        rev("A", "a3", "update", "open", 14),
        rev("C", "c1", "create", "open", 15),
    ]
}

#[test]
fn revision_rows_parse_and_a_bad_one_is_an_error() {
    let r = parse_revisions("A a1 create open 10 0\nB b1 update priv 11 1700000000\n").expect("rows");
    assert_eq!(r[1], Rev { created_at: 1_700_000_000, ..rev("B", "b1", "update", "priv", 11) });
    assert!(parse_revisions("A a1 create open 10\n").is_err());
    assert!(parse_revisions("A a1 create open x 0\n").is_err());
    assert!(revisions("postgres://x", "not-a-uuid").is_err());
}

#[test]
fn sound_history_answers_pass() {
    let r = recs(
        r#"
        {"t":"ack","op":"artifact.create","id":"a1","kind":45010,"us":100}
        {"t":"ack","op":"artifact.update","id":"a2","kind":45010,"us":200}
        {"t":"history","pk":"x","d":"A","req_us":250,"revs":[["a1","open","A"],["a2","open","A"]]}
        {"t":"history","pk":"x","d":"A","req_us":900,"revs":[["a1","open","A"],["a2","open","A"],["a3","open","A"]]}
        {"t":"history","pk":"x","d":"B","req_us":900,"revs":[]}
        {"t":"history","pk":"m","d":"B","req_us":900,"revs":[["b1","priv","B"],["b2","priv","B"]]}
        "#,
    );
    let v = judge(&r, &revs(), &scope());
    assert!(v.lines()[0].pass, "{v:?}");
    assert_eq!((v.history_checked, v.history_unreadable, v.history_revisions), (4, 1, 7));
}

#[test]
fn leaked_forged_forked_and_short_histories_fail() {
    let r = recs(
        r#"
        {"t":"ack","op":"artifact.update","id":"a2","kind":45010,"us":200}
        {"t":"history","pk":"x","d":"B","req_us":900,"revs":[["b1","priv","B"]]}
        {"t":"history","pk":"x","d":"A","req_us":900,"revs":[["b1","priv","B"]]}
        {"t":"history","pk":"x","d":"A","req_us":900,"revs":[["a1","priv","A"]]}
        {"t":"history","pk":"x","d":"A","req_us":900,"revs":[["a1","open","A"],["a3","open","A"]]}
        {"t":"history","pk":"x","d":"A","req_us":900,"revs":[["a1","open","A"]]}
        "#,
    );
    let v = judge(&r, &revs(), &scope());
    // A non-member got B's revision; b1 is not A's; a1 is not in the private channel; a2 skipped;
    // a2, acknowledged before the queries, is missing from each answer about A.
    assert_eq!((v.history_leaks, v.history_bad, v.history_forks, v.history_missing), (1, 2, 1, 4));
    assert!(!v.lines()[0].pass);
    assert!(v.lines()[1].pass, "no manifest: nothing to fail");
}

#[test]
fn a_manifest_of_one_point_in_the_acceptance_order_passes() {
    let r = recs(
        r#"
        {"t":"ack","op":"artifact.create","id":"a1","kind":45010,"us":100}
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":150,"manifest":[["A","a2","open"]]}
        {"t":"snapshot","outcome":"complete","pk":"m","start_us":150,"manifest":[["A","a2","open"],["B","b1","priv"]]}
        {"t":"snapshot","outcome":"complete","pk":"m","start_us":150,"manifest":[["A","a3","open"],["B","b2","priv"],["C","c1","open"]]}
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":50,"manifest":[]}
        {"t":"snapshot","outcome":"http","status":409,"code":"snapshot_reset"}
        "#,
    );
    let v = judge(&r, &revs(), &scope());
    assert!(v.lines()[1].pass, "{v:?}");
    assert_eq!((v.manifests_checked, v.manifest_entries, v.manifest_private_entries), (4, 6, 2));
}

/// The revisions come in commit order (the check's SQL orders them so); a transaction that took
/// its seq first may commit last. The floor and ceiling are positions in that order, not seqs.
#[test]
fn cuts_are_positions_in_the_commit_order_not_seqs() {
    // D's create took seq 20 but committed after E's (seq 24), and F's (seq 22) after D's; E and
    // F were acknowledged before the capture, D during it. The capture saw all three: the floor
    // is F's position in the commit order, although F's seq is below E's.
    let revs = vec![
        rev("E", "e1", "create", "open", 24),
        rev("D", "d1", "create", "open", 20),
        rev("F", "f1", "create", "open", 22),
    ];
    let r = recs(
        r#"
        {"t":"ack","op":"artifact.create","id":"e1","kind":45010,"us":100}
        {"t":"ack","op":"artifact.create","id":"f1","kind":45010,"us":150}
        {"t":"ack","op":"artifact.create","id":"d1","kind":45010,"us":300}
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":200,"manifest":[["E","e1","open"],["D","d1","open"],["F","f1","open"]]}
        "#,
    );
    let v = judge(&r, &revs, &scope());
    assert!(v.lines()[1].pass, "{v:?}");
    // The same manifest without E is below the floor: E was acknowledged before the capture.
    let r = recs(
        r#"
        {"t":"ack","op":"artifact.create","id":"e1","kind":45010,"us":100}
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":200,"manifest":[["D","d1","open"]]}
        "#,
    );
    assert_eq!(judge(&r, &revs, &scope()).manifests_off, 1);
}

#[test]
fn a_manifest_of_no_single_point_or_with_a_private_entry_for_an_outsider_fails() {
    let r = recs(
        r#"
        {"t":"ack","op":"artifact.update","id":"a3","kind":45010,"us":100}
        {"t":"snapshot","outcome":"complete","pk":"m","start_us":5,"manifest":[["A","a1","open"],["B","b2","priv"]]}
        {"t":"snapshot","outcome":"complete","pk":"m","start_us":5,"manifest":[["A","a3","open"]]}
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":500,"manifest":[["A","a2","open"]]}
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":500,"manifest":[["A","a3","open"],["B","b2","priv"]]}
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":500,"manifest":[["A","a3","priv"]]}
        "#,
    );
    let v = judge(&r, &revs(), &scope());
    // 1: a1 was never current beside b2. 2: B current (b1, b2) whenever a3 was, missing for a
    // member. 3: a2 is older than a3, acknowledged before the capture started. 4: b2 leaked to a
    // non-member (and C missing). 5: a3's channel is wrong.
    assert_eq!(v.manifests_off, 5, "{v:?}");
    assert_eq!(v.manifest_leaks, 2);
    assert!(!v.lines()[1].pass);
}

#[test]
fn a_deleted_or_moved_artifact_must_be_absent() {
    let mut revs = revs();
    revs.push(rev("A", "a4", "delete", "open", 16));
    revs.push(rev("C", "c2", "move", "priv", 17));
    let r = recs(
        r#"
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":1,"manifest":[]}
        {"t":"snapshot","outcome":"complete","pk":"m","start_us":1,"manifest":[["B","b2","priv"],["C","c2","priv"]]}
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":1,"manifest":[["A","a4","open"]]}
        "#,
    );
    let v = judge(&r, &revs, &scope());
    assert_eq!((v.manifests_checked, v.manifests_off), (3, 1), "{v:?}");
}

#[test]
fn a_manifest_cannot_hold_a_revision_signed_after_the_capture_ended() {
    let mut revs = revs();
    // a3 was signed at second 100; captures ended at second 50 and 200.
    revs[4].created_at = 100;
    let r = recs(
        r#"
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":1,"end_us":50000000,"manifest":[["A","a3","open"],["C","c1","open"]]}
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":1,"end_us":50000000,"manifest":[["A","a2","open"]]}
        {"t":"snapshot","outcome":"complete","pk":"x","start_us":1,"end_us":200000000,"manifest":[["A","a3","open"],["C","c1","open"]]}
        "#,
    );
    let v = judge(&r, &revs, &scope());
    assert_eq!((v.manifests_checked, v.manifests_off), (3, 1), "{v:?}");
}

#[test]
fn private_chat_is_owed_to_member_listeners_only() {
    let r = recs(
        r#"
        {"t":"lkey","l":1,"pk":"m","member":true,"us":1}
        {"t":"lkey","l":2,"pk":"x","member":false,"us":1}
        {"t":"sub","l":1,"n":0,"since":1,"req_us":1000,"us":1100}
        {"t":"sub","l":2,"n":0,"since":1,"req_us":1000,"us":1100}
        {"t":"ack","op":"chat","id":"p","kind":9,"msg":"","attempt":1,"us":5000000}
        {"t":"ack","op":"chat","id":"o","kind":9,"msg":"","attempt":1,"us":5000000}
        {"t":"recv","l":1,"id":"o","us":5000100}
        {"t":"recv","l":2,"id":"o","us":5000100}
        {"t":"lend","l":1,"us":90000000}
        {"t":"lend","l":2,"us":90000000}
        "#,
    );
    let at = |ch: &str| Stored { kind: 9, created_at: 1, channel: Some(ch.to_owned()) };
    let st = HashMap::from([("o".to_owned(), at("open")), ("p".to_owned(), at("priv"))]);
    let v = verdict::judge(&r, &st, 2000, &scope());
    // The member missed the private event; the outsider owed only the open one.
    assert_eq!((v.listener_expected, v.listener_received, v.gaps_without_close), (3, 2, 1));
    assert!(!v.pass);
    let mut r = r;
    r.extend(recs(r#"{"t":"recv","l":1,"id":"p","us":5000200}"#));
    assert!(verdict::judge(&r, &st, 2000, &scope()).pass);
}
