//! Unit tests of `nip86`.

use super::*;
use serde_json::json;

const KEY: &str = "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e";

#[test]
fn every_supported_method_parses_and_names_itself() {
    for m in SUPPORTED {
        let params = match m {
            "banpubkey" | "unbanpubkey" | "allowpubkey" | "unallowpubkey" | "banevent" | "unbanevent"
            | "allowevent" => vec![json!(KEY)],
            "changerelayicon" => vec![json!("https://x.test/i.png")],
            "allowkind" | "disallowkind" => vec![json!(9)],
            "blockip" | "unblockip" => vec![json!("::ffff:10.0.0.1")],
            "changerelayname" | "changerelaydescription" => vec![json!("x")],
            _ => vec![],
        };
        assert_eq!(call(m, &params).map(|c| c.method()), Ok(m), "{m}");
    }
}

#[test]
fn bad_requests_are_refused_with_a_reason() {
    for (body, says) in [
        (json!([]), "JSON object"),
        (json!({"method": 1}), "method must be"),
        (json!({"method": "banpubkey", "params": {}}), "params must be an array"),
        (json!({"method": "banpubkey", "params": []}), "1 to 2 params"),
        (json!({"method": "banpubkey", "params": ["ABC"]}), "64 lowercase hex"),
        (json!({"method": "banpubkey", "params": [KEY, 5]}), "reason must be a string"),
        (json!({"method": "grantadmin", "params": [KEY, []]}), "unsupported method"),
        (json!({"method": "blockip", "params": ["1.2.3"]}), "IPv4 or IPv6"),
        (json!({"method": "changerelayname", "params": [""]}), "1 to 64"),
        (json!({"method": "changerelayicon", "params": ["ftp://x"]}), "http:// or https://"),
        (json!({"method": "supportedmethods", "id": 1}), "unknown field"),
    ] {
        let err = parse(body.to_string().as_bytes()).unwrap_err();
        assert!(err.contains(says), "{body}: {err}");
    }
}

#[test]
fn kind_rules_refuse_disallowed_kinds_and_with_an_allowlist_every_other() {
    let open = KindRules::default();
    assert!(open.is_open() && open.admits(9) && open.admits(45010));
    let rules = KindRules { allowed: vec![9, 9007], disallowed: vec![9007] };
    assert!(rules.admits(9) && !rules.admits(9007) && !rules.admits(45010));
    let rules = KindRules { allowed: vec![], disallowed: vec![5] };
    assert!(rules.admits(9) && !rules.admits(5));
}

#[test]
fn a_reason_is_optional_and_params_may_be_absent() {
    let c = parse(json!({"method": "banpubkey", "params": [KEY, "spam"]}).to_string().as_bytes());
    assert!(matches!(c, Ok(Call::BanPubkey { reason: Some(r), .. }) if r == "spam"));
    let c = parse(json!({"method": "supportedmethods"}).to_string().as_bytes());
    assert_eq!(c, Ok(Call::SupportedMethods));
    assert!(!Call::SupportedMethods.changes());
    assert!(Call::ChangeRelayName { name: "x".into() }.changes());
}
