use serde_json::json;

use super::*;

fn ev(id_byte: char, pubkey_byte: char, kind: u32, created_at: i64, tags: &[&[&str]]) -> Event {
    Event {
        id: EventId::parse(&id_byte.to_string().repeat(64)).unwrap(),
        pubkey: Pubkey::parse(&pubkey_byte.to_string().repeat(64)).unwrap(),
        created_at,
        kind,
        tags: tags.iter().map(|t| t.iter().map(|s| (*s).to_owned()).collect()).collect(),
        content: String::new(),
        sig: "0".repeat(128),
    }
}

fn parse(v: serde_json::Value) -> Result<Filter, FilterError> {
    Filter::from_value(&v)
}

#[test]
fn parses_all_fields_and_round_trips() {
    let v = json!({
        "ids": ["a".repeat(64)], "authors": ["b".repeat(64)], "kinds": [1, 9, 4294967295u64],
        "#e": ["x"], "#h": [], "since": 0, "until": 10, "limit": 0, "artifact": "current", "offset": 5,
        "#title": ["y", "y"]
    });
    let f = parse(v.clone()).expect("valid");
    assert_eq!(f.kinds, Some(vec![1, 9, u32::MAX]));
    assert_eq!(f.limit, Some(0));
    assert_eq!(f.artifact, Some(ArtifactForm::Current));
    assert_eq!(f.tags.get("title"), Some(&vec!["y".to_owned(), "y".to_owned()]));
    assert_eq!(f.to_value(), v);
    let back: Filter = serde_json::from_str(&serde_json::to_string(&f).expect("ser")).expect("de");
    assert_eq!(back, f);
    assert_eq!(Filter::default().to_value(), json!({}));
}

#[test]
fn rejects_bad_fields() {
    let invalid = [
        json!([]),
        json!("x"),
        json!({"ids": "a"}),
        json!({"ids": ["A".repeat(64)]}),
        json!({"ids": ["abc"]}),
        json!({"authors": [1]}),
        json!({"kinds": [-1]}),
        json!({"kinds": [4294967296u64]}),
        json!({"kinds": [1.5]}),
        json!({"kinds": ["1"]}),
        json!({"since": -1}),
        json!({"until": -5}),
        json!({"since": "1"}),
        json!({"limit": -1}),
        json!({"limit": null}),
        json!({"offset": 4294967296u64}),
        json!({"artifact": 1}),
        json!({"#e": "x"}),
        json!({"#e": [1]}),
        json!({"#": ["x"]}),
        json!({ format!("#{}", "a".repeat(65)): ["x"] }),
    ];
    for v in invalid {
        assert!(matches!(parse(v.clone()), Err(FilterError::Invalid(_))), "{v}");
    }
    assert_eq!(
        parse(json!({"nonce": "x"})),
        Err(FilterError::Unsupported("filter field \"nonce\" is not supported".into()))
    );
    assert_eq!(parse(json!({"search": 1})), Err(FilterError::Invalid("search must be a string".into())));
    assert_eq!(parse(json!({"search": "deploy"})).expect("search parses").search.as_deref(), Some("deploy"));
    assert!(parse(json!({ format!("#{}", "a".repeat(64)): ["x"] })).is_ok());
    assert_eq!(parse(json!({"limit": 1u64 << 40})).expect("saturates").limit, Some(u32::MAX));
}

#[test]
fn validate_limits() {
    let limits = Limits { max_filter_values: 2, max_tag_value_length: 4, ..Limits::default() };
    let ok = parse(json!({"kinds": [1, 2], "#t": ["abcd"]})).expect("parse");
    assert_eq!(ok.validate(&limits), Ok(()));
    for v in [
        json!({"kinds": [1, 2, 3]}),
        json!({"ids": ["a".repeat(64), "b".repeat(64), "c".repeat(64)]}),
        json!({"authors": ["a".repeat(64), "b".repeat(64), "c".repeat(64)]}),
        json!({"#t": ["a", "b", "c"]}),
        json!({"#t": ["abcde"]}),
    ] {
        assert!(
            matches!(parse(v.clone()).expect("parse").validate(&limits), Err(FilterError::Invalid(_))),
            "{v}"
        );
    }
    let multi = parse(json!({"#title": ["x"]})).expect("parse");
    let err = multi.validate(&limits).expect_err("multi-char");
    assert_eq!(
        err,
        FilterError::Unsupported(
            "multi-character tag filters need an artifact query (\"artifact\":\"current\")".into()
        )
    );
    assert!(err.to_string().starts_with("unsupported: "));
    let with_artifact = parse(json!({"#title": ["x"], "artifact": "current"})).expect("parse");
    assert_eq!(with_artifact.validate(&limits), Ok(()));
}

#[test]
fn effective_limit() {
    let limits = Limits::default();
    assert_eq!(Filter::default().effective_limit(&limits), 100);
    assert_eq!(Filter { limit: Some(0), ..Filter::default() }.effective_limit(&limits), 0);
    assert_eq!(Filter { limit: Some(10_000), ..Filter::default() }.effective_limit(&limits), 500);
}

#[test]
fn matching() {
    let e = ev(
        'a',
        'b',
        9,
        100,
        &[&["h", "group"], &["p", "c"], &["t", "rust", "extra"], &["t", "nostr"], &["x"]],
    );
    let yes = [
        json!({}),
        json!({"ids": ["a".repeat(64), "f".repeat(64)]}),
        json!({"authors": ["b".repeat(64)]}),
        json!({"kinds": [1, 9]}),
        json!({"since": 100, "until": 100}),
        json!({"#h": ["group"], "#t": ["nostr"]}),
        json!({"#t": ["go", "rust"]}),
        json!({"kinds": [9], "#h": ["group"], "since": 50}),
    ];
    for v in yes {
        assert!(parse(v.clone()).expect("parse").matches(&e), "{v}");
    }
    let no = [
        json!({"ids": []}),
        json!({"authors": []}),
        json!({"kinds": []}),
        json!({"#h": []}),
        json!({"ids": ["f".repeat(64)]}),
        json!({"authors": ["a".repeat(64)]}),
        json!({"kinds": [1]}),
        json!({"since": 101}),
        json!({"until": 99}),
        json!({"#h": ["group"], "#t": ["go"]}),
        json!({"#t": ["extra"]}),
        json!({"#x": ["x"]}),
        json!({"#q": ["group"]}),
    ];
    for v in no {
        assert!(!parse(v.clone()).expect("parse").matches(&e), "{v}");
    }
    assert!(Filter { limit: Some(0), ..Filter::default() }.matches(&e), "limit is ignored");
}

#[test]
fn artifact_queries_are_checked_against_the_artifact_limits() {
    let limits = Limits::default();
    // A snapshot filter and an unknown form are refused while parsing, every other refusal by
    // `validate`.
    let ok = |v: serde_json::Value| parse(v).and_then(|f| f.validate(&limits));
    assert_eq!(
        ok(json!({"artifact": "current", "#project": ["a", "b"], "limit": 500, "offset": 10})),
        Ok(())
    );
    assert_eq!(ok(json!({"artifact": "history", "#d": ["04737c81-e5e8-4412-bb47-f446813cfeba"]})), Ok(()));
    for (v, unsupported) in [
        (json!({"artifact": "current", "limit": 501}), false),
        (json!({"artifact": "current", "offset": 10_001}), false),
        (json!({"artifact": "current", "#t": vec!["x"; 101]}), false),
        (json!({"artifact": "history"}), false),
        (json!({"artifact": "history", "#d": ["04737C81-E5E8-4412-BB47-F446813CFEBA"]}), false),
        (json!({"artifact": "current", "kinds": [45010]}), true),
        (json!({"artifact": "snapshot"}), true),
        (json!({"artifact": "latest"}), true),
        (json!({"offset": 1}), true),
    ] {
        let err = ok(v.clone()).expect_err("refused");
        assert_eq!(matches!(err, FilterError::Unsupported(_)), unsupported, "{v}: {err}");
    }
}

#[test]
fn a_snapshot_filter_names_the_signed_post_query_transport() {
    for v in
        [json!({"artifact": "snapshot", "action": "start", "query": {}}), json!({"artifact": "snapshot"})]
    {
        let err = parse(v).expect_err("refused");
        assert_eq!(err.to_string(), "unsupported: snapshot uses signed POST /query");
    }
}

#[test]
fn an_artifact_filter_matches_only_revisions_live() {
    let f = parse(json!({"artifact": "current", "#project": ["p"]})).expect("parse");
    assert!(f.matches(&ev('a', 'b', 45010, 1, &[&["project", "p"]])));
    assert!(!f.matches(&ev('a', 'b', 9, 1, &[&["project", "p"]])));
}

#[test]
fn a_current_subscription_matches_what_replaced_a_revision_it_matched() {
    let hash = |v: &str| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(v.as_bytes()));
    let replaced = vec![
        ["project".to_owned(), hash("a")],
        ["type".to_owned(), hash("buzz.task")],
        ["d".to_owned(), hash("x")],
    ];
    let moved_to_b = ev('a', 'b', 45010, 1, &[&["project", "b"], &["type", "buzz.task"]]);
    let removal = ev('a', 'b', 45011, 1, &[&["d", "x"]]);
    let chat = ev('a', 'b', 9, 1, &[&["project", "a"]]);
    let in_a =
        parse(json!({"artifact": "current", "#project": ["a"], "#type": ["buzz.task"]})).expect("parse");
    assert!(!in_a.matches(&moved_to_b));
    assert!(in_a.matched_replaced(&moved_to_b, &replaced));
    assert!(in_a.matched_replaced(&removal, &replaced));
    assert!(!in_a.matched_replaced(&chat, &replaced), "only revisions and removals");
    assert!(!in_a.matched_replaced(&moved_to_b, &[]), "nothing served was replaced");
    // AND across names, OR within a name, as for stored events.
    let in_c = parse(json!({"artifact": "current", "#project": ["c"]})).expect("parse");
    assert!(!in_c.matched_replaced(&moved_to_b, &replaced));
    let a_or_c = parse(json!({"artifact": "current", "#project": ["c", "a"]})).expect("parse");
    assert!(a_or_c.matched_replaced(&removal, &replaced));
    let notes =
        parse(json!({"artifact": "current", "#project": ["a"], "#type": ["buzz.note"]})).expect("parse");
    assert!(!notes.matched_replaced(&removal, &replaced));
    // Every artifact: an untagged current subscription; never a generic or history filter.
    assert!(parse(json!({"artifact": "current"})).expect("parse").matched_replaced(&removal, &replaced));
    assert!(!parse(json!({"kinds": [45010, 45011]})).expect("parse").matched_replaced(&removal, &replaced));
    let history = parse(json!({"artifact": "history", "#d": ["x"]})).expect("parse");
    assert!(!history.matched_replaced(&removal, &replaced));
}

#[test]
fn nul_in_a_tag_filter_name_or_value_is_invalid() {
    for v in [
        json!({"#\u{0}": ["x"]}),
        json!({"#t\u{0}": ["x"]}),
        json!({"#t": ["ok", "a\u{0}"]}),
        json!({"artifact": "current", "#type": ["\u{0}"]}),
    ] {
        match parse(v.clone()) {
            Err(FilterError::Invalid(why)) => assert!(why.contains("NUL"), "{v}: {why}"),
            other => panic!("{v}: {other:?}"),
        }
    }
}
