//! Every malformed event shape is answered in plain words: the field and what it must be, with
//! the NIP-01 `invalid:` prefix, never a parser's message or a Rust type name.

use super::*;

const ID: &str = "1111111111111111111111111111111111111111111111111111111111111111";

/// An EVENT (or AUTH) whose event has `fields` as raw JSON members, in order.
fn frame(kind: &str, fields: &[(&str, &str)]) -> String {
    let members: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("[\"{kind}\",{{{}}}]", members.join(","))
}

/// The well-formed members, with `field` replaced by `value` (`None`: left out).
fn with(field: &str, value: Option<&str>) -> Vec<(&'static str, String)> {
    let base = [
        ("id", format!("\"{ID}\"")),
        ("pubkey", format!("\"{}\"", "a".repeat(64))),
        ("created_at", "1700000000".to_owned()),
        ("kind", "1".to_owned()),
        ("tags", "[]".to_owned()),
        ("content", "\"\"".to_owned()),
        ("sig", format!("\"{}\"", "b".repeat(128))),
    ];
    base.into_iter()
        .filter_map(|(k, v)| if k == field { value.map(|x| (k, x.to_owned())) } else { Some((k, v)) })
        .collect()
}

fn parse_with(kind: &str, field: &str, value: Option<&str>) -> Result<ClientMessage, ParseError> {
    let members = with(field, value);
    let borrowed: Vec<(&str, &str)> = members.iter().map(|(k, v)| (*k, v.as_str())).collect();
    ClientMessage::parse(&frame(kind, &borrowed), &Limits::default())
}

fn rejected(reason: &str) -> Result<ClientMessage, ParseError> {
    Err(ParseError::Ok { id: crate::ids::EventId::parse(ID).unwrap(), reason: reason.into() })
}

#[test]
fn every_malformed_field_is_named_with_what_it_must_be() {
    let ahead = Limits::default().created_at_upper_limit;
    let future = format!("invalid: created_at is too far in the future (more than {ahead} s ahead)");
    let not_integer = "invalid: created_at must be an integer (unix seconds)";
    let cases: Vec<(&str, Option<&str>, String)> = vec![
        ("created_at", Some("1e9"), not_integer.into()),
        ("created_at", Some("1.7e9"), not_integer.into()),
        ("created_at", Some("1700000000.0"), not_integer.into()),
        ("created_at", Some("1700000000.5"), not_integer.into()),
        ("created_at", Some("-1e3"), not_integer.into()),
        ("created_at", Some("\"1700000000\""), not_integer.into()),
        ("created_at", Some("null"), not_integer.into()),
        ("created_at", Some("true"), not_integer.into()),
        ("created_at", Some("[1]"), not_integer.into()),
        ("created_at", Some("99999999999999999999999"), future.clone()),
        ("created_at", Some("-99999999999999999999999"), "invalid: created_at must not be negative".into()),
        ("created_at", Some("-1"), "invalid: created_at must not be negative".into()),
        ("created_at", Some("99999999999"), future),
        ("created_at", None, "invalid: missing event field created_at".into()),
        ("kind", Some("1.5"), "invalid: kind must be an integer from 0 to 4294967295".into()),
        ("kind", Some("1e3"), "invalid: kind must be an integer from 0 to 4294967295".into()),
        ("kind", Some("-1"), "invalid: kind must be an integer from 0 to 4294967295".into()),
        ("kind", Some("4294967296"), "invalid: kind must be an integer from 0 to 4294967295".into()),
        ("kind", Some("\"1\""), "invalid: kind must be an integer from 0 to 4294967295".into()),
        ("kind", None, "invalid: missing event field kind".into()),
        ("tags", Some("{}"), "invalid: tags must be an array of arrays of strings".into()),
        ("tags", Some("[[1]]"), "invalid: tags must be an array of arrays of strings".into()),
        ("tags", Some("[\"e\"]"), "invalid: tags must be an array of arrays of strings".into()),
        ("tags", Some("[[null]]"), "invalid: tags must be an array of arrays of strings".into()),
        ("tags", None, "invalid: missing event field tags".into()),
        ("content", Some("1"), "invalid: content must be a string".into()),
        ("content", Some("null"), "invalid: content must be a string".into()),
        ("content", None, "invalid: missing event field content".into()),
        ("pubkey", Some("7"), "invalid: pubkey must be a string".into()),
        ("pubkey", None, "invalid: missing event field pubkey".into()),
        ("sig", Some("{}"), "invalid: sig must be a string".into()),
        ("sig", None, "invalid: missing event field sig".into()),
    ];
    for (field, value, want) in cases {
        assert_eq!(parse_with("EVENT", field, value), rejected(&want), "{field} = {value:?}");
    }
    // AUTH has its own created_at window: a huge one is still too far ahead, in plain words.
    assert_eq!(
        parse_with("AUTH", "created_at", Some("99999999999999999999999")),
        rejected("invalid: created_at is too far in the future")
    );
    assert_eq!(parse_with("AUTH", "created_at", Some("1e9")), rejected(not_integer));
}

#[test]
fn unknown_repeated_and_id_problems_are_named_too() {
    let limits = Limits::default();
    let mut extra = with("none", None);
    extra.push(("nonce", "1".into()));
    let borrowed: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(
        ClientMessage::parse(&frame("EVENT", &borrowed), &limits),
        rejected("invalid: unknown event field \"nonce\"")
    );
    let mut twice = with("none", None);
    twice.push(("kind", "\"one\"".into()));
    let borrowed: Vec<(&str, &str)> = twice.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(
        ClientMessage::parse(&frame("EVENT", &borrowed), &limits),
        rejected("invalid: event field kind appears more than once")
    );
    // Without a well-formed id there is no OK to answer: a NOTICE with the same plain words.
    let notice = |text: &str| Err(ParseError::Notice(text.into()));
    assert_eq!(parse_with("EVENT", "id", None), notice("invalid: missing event field id"));
    assert_eq!(parse_with("EVENT", "id", Some("12")), notice("invalid: id must be a string"));
    let no_id: Vec<(&str, String)> = with("id", Some("\"xyz\""))
        .into_iter()
        .map(|(k, v)| if k == "kind" { (k, "1.5".into()) } else { (k, v) })
        .collect();
    let borrowed: Vec<(&str, &str)> = no_id.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(
        ClientMessage::parse(&frame("EVENT", &borrowed), &limits),
        notice("invalid: kind must be an integer from 0 to 4294967295")
    );
    assert_eq!(
        ClientMessage::parse(r#"["EVENT",[1,2]]"#, &limits),
        notice("invalid: event must be a JSON object")
    );
    assert_eq!(ClientMessage::parse(r#"["EVENT",{}]"#, &limits), notice("invalid: missing event field id"));
}

#[test]
fn no_reason_names_a_rust_type_or_a_parser_position() {
    let shapes = ["1e9", "-1.5", "\"x\"", "null", "{}", "[]", "18446744073709551616", "true"];
    let mut reasons = Vec::new();
    for field in ["id", "pubkey", "created_at", "kind", "tags", "content", "sig"] {
        for shape in shapes {
            for kind in ["EVENT", "AUTH"] {
                match parse_with(kind, field, Some(shape)) {
                    Err(ParseError::Ok { reason, .. } | ParseError::Notice(reason)) => reasons.push(reason),
                    // The only well-formed values among the shapes.
                    other => assert!(
                        matches!((field, shape), ("content", "\"x\"") | ("tags", "[]")) && other.is_ok(),
                        "{field} = {shape}: {other:?}"
                    ),
                }
            }
        }
    }
    for reason in reasons {
        assert!(reason.starts_with("invalid: "), "{reason}");
        for leak in ["i64", "u32", "u64", "invalid type", "expected", "`", " at line ", "column", "Vec<"] {
            assert!(!reason.contains(leak), "{reason:?} leaks {leak:?}");
        }
    }
}
