//! The checker's judge on synthetic audit lines ([`super`]).

use std::collections::HashMap;

use super::*;
use crate::distributed::check::db::Stored;

fn stored(ids: &[(&str, u32)]) -> HashMap<String, Stored> {
    ids.iter()
        .map(|(id, k)| ((*id).to_owned(), Stored { kind: *k, created_at: 100, channel: None }))
        .collect()
}

use crate::distributed::audit::test_lines as lines;

#[test]
fn a_clean_run_passes_and_expected_refusals_are_apart() {
    let r = lines(
        r#"
        {"t":"sub","l":7,"n":0,"since":1,"req_us":1000,"us":1100}
        {"t":"ack","op":"chat","id":"a","kind":9,"msg":"","attempt":1,"us":5000000}
        {"t":"recv","l":7,"id":"a","us":5000100}
        {"t":"ack","op":"artifact.create","id":"b","kind":45010,"msg":"","attempt":1,"us":6000000}
        {"t":"answer","op":"artifact.stale","via":"ok","prefix":"conflict","msg":"conflict: stale","expected":true,"us":6000001}
        {"t":"answer","op":"chat","via":"ok","prefix":"error","msg":"error: internal","expected":false,"us":6000002}
        {"t":"ack","op":"chat","id":"c","kind":9,"msg":"duplicate: have it","attempt":2,"us":7000000}
        {"t":"lclose","l":7,"n":0,"why":"closed","us":6500000}
        {"t":"sub","l":7,"n":1,"since":1,"req_us":6600000,"us":6700000}
        {"t":"recv","l":7,"id":"c","us":6650000}
        {"t":"snapshot","outcome":"complete","entries":3,"us":1}
        {"t":"snapshot","outcome":"http","status":409,"code":"snapshot_reset","action":"page","us":1}
        {"t":"snapshot","outcome":"http","status":503,"code":"authorization_unavailable","action":"start","us":1}
        {"t":"answer","op":"snapshot.capture","via":"http","prefix":"(none)","msg":"503 authorization_unavailable: {}","expected":false,"us":2}
        {"t":"snapshot","outcome":"http","status":504,"code":"timeout","action":"start","us":1}
        {"t":"answer","op":"snapshot.capture","via":"http","prefix":"(none)","msg":"504 timeout: {}","expected":false,"us":2}
        {"t":"lend","l":7,"us":90000000}
        "#,
    );
    let v = judge(&r, &stored(&[("a", 9), ("b", 45010), ("c", 9)]), 2000, &Scope::default());
    assert!(v.pass, "{}", v.text());
    assert_eq!(v.expected_refusals["conflict"], 1);
    assert_eq!(v.error_answers, 1);
    assert_eq!((v.duplicate_answers, v.acked_after_resend), (1, 1));
    assert_eq!((v.listener_expected, v.listener_received, v.listener_resubscribes), (2, 2, 1));
}

#[test]
fn lost_writes_refusals_gaps_and_bad_snapshots_fail() {
    let r = lines(
        r#"
        {"t":"sub","l":1,"n":0,"since":1,"req_us":1000,"us":1100}
        {"t":"ack","op":"chat","id":"a","kind":9,"msg":"","attempt":1,"us":5000000}
        {"t":"ack","op":"chat","id":"gone","kind":9,"msg":"","attempt":1,"us":5000000}
        {"t":"answer","op":"chat","via":"ok","prefix":"restricted","msg":"restricted: no","expected":false,"us":2}
        {"t":"unanswered","op":"chat","id":"x","kind":9,"us":3}
        {"t":"snapshot","outcome":"http","status":500,"code":"internal","action":"start","us":1}
        {"t":"lend","l":1,"us":90000000}
        "#,
    );
    let v = judge(&r, &stored(&[("a", 9)]), 2000, &Scope::default());
    assert!(!v.pass);
    assert_eq!(v.lost, vec!["gone".to_owned()]);
    let failed: Vec<bool> = v.lines.iter().map(|l| l.pass).collect();
    assert_eq!(failed, vec![false, false, true, true, false, false]);
    // "a" and "gone" were both missed while the subscription stayed open.
    assert_eq!(v.gaps_without_close, 2);
    assert!(v.markdown().contains("FAIL"));
}
