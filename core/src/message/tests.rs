//! Table-driven tests of `ClientMessage::parse`.

use super::*;
use crate::keys::Keys;

/// How a case is expected to come out.
#[derive(Debug)]
enum Want {
    Event,
    Auth,
    Req(usize),
    Count(usize),
    Close(&'static str),
    /// Notice whose text starts with this.
    Notice(&'static str),
    /// OK false for the event's id with a reason starting with this.
    Ok(&'static str),
    /// CLOSED for this sub id with a reason starting with this.
    Closed(&'static str, &'static str),
}

fn event_json(tags: &[&[&str]], content: &str) -> String {
    let tags = tags.iter().map(|t| t.iter().map(|s| (*s).to_owned()).collect()).collect();
    Keys::generate().sign_new(9, tags, content).to_json()
}

#[test]
fn parse_table() {
    let limits = Limits::default();
    let valid = event_json(&[&["h", "group"], &["e", &"a".repeat(64)]], "hello");
    let auth = event_json(&[&["relay", "wss://relay.example.com"], &["challenge", "c"]], "");
    let many_tags: Vec<&[&str]> = vec![&["t", "x"]; 257];
    let huge = "v".repeat(1025);
    let big_content = "c".repeat(65_537);
    let id = "f".repeat(64);
    let hex_ok = |extra: &str| {
        format!(
            r#"{{"id":"{id}","pubkey":"{}","created_at":1,"kind":1,"tags":[],"content":"","sig":"{}"{extra}}}"#,
            "a".repeat(64),
            "b".repeat(128)
        )
    };
    let twelve_filters = format!(r#"["REQ","s"{}]"#, r#",{}"#.repeat(11));
    let long_sub = format!(r#"["REQ","{}",{{}}]"#, "s".repeat(65));
    let max_sub = format!(r#"["REQ","{}",{{}}]"#, "é".repeat(64));

    let cases: Vec<(&str, String, Want)> = vec![
        ("invalid json", "[\"EVENT\",".into(), Want::Notice("invalid: ")),
        ("garbage", "hello".into(), Want::Notice("invalid: ")),
        ("not an array", r#"{"EVENT":1}"#.into(), Want::Notice("invalid: message must be a JSON array")),
        ("empty array", "[]".into(), Want::Notice("invalid: ")),
        ("type not a string", "[1,2]".into(), Want::Notice("invalid: ")),
        ("unknown type", r#"["PING"]"#.into(), Want::Notice("unsupported: unknown message type PING")),
        ("lowercase type", r#"["event",{}]"#.into(), Want::Notice("unsupported: ")),
        ("EVENT no event", r#"["EVENT"]"#.into(), Want::Notice("invalid: ")),
        ("EVENT two events", format!(r#"["EVENT",{valid},{valid}]"#), Want::Notice("invalid: ")),
        ("EVENT with sub id", format!(r#"["EVENT","sub",{valid}]"#), Want::Notice("invalid: ")),
        ("EVENT not object", r#"["EVENT","x"]"#.into(), Want::Notice("invalid: ")),
        ("EVENT missing fields, no id", r#"["EVENT",{"kind":1}]"#.into(), Want::Notice("invalid: ")),
        (
            "EVENT missing field with id",
            format!(r#"["EVENT",{{"id":"{id}","kind":1}}]"#),
            Want::Ok("invalid: "),
        ),
        (
            "EVENT unknown field",
            format!(r#"["EVENT",{}]"#, hex_ok(r#","extra":true"#)),
            Want::Ok("invalid: "),
        ),
        (
            "EVENT kind negative",
            format!(r#"["EVENT",{}]"#, hex_ok("").replace(r#""kind":1"#, r#""kind":-1"#)),
            Want::Ok("invalid: "),
        ),
        (
            "EVENT kind > u32",
            format!(r#"["EVENT",{}]"#, hex_ok("").replace(r#""kind":1"#, r#""kind":4294967296"#)),
            Want::Ok("invalid: "),
        ),
        (
            "EVENT tags wrong type",
            format!(r#"["EVENT",{}]"#, hex_ok("").replace(r#""tags":[]"#, r#""tags":[[1]]"#)),
            Want::Ok("invalid: "),
        ),
        (
            "EVENT uppercase id",
            format!(r#"["EVENT",{}]"#, hex_ok("").replace(&id, &id.to_uppercase())),
            Want::Notice("invalid: "),
        ),
        (
            "EVENT short id",
            format!(r#"["EVENT",{}]"#, hex_ok("").replace(&id, "ff")),
            Want::Notice("invalid: "),
        ),
        (
            "EVENT bad pubkey hex",
            format!(r#"["EVENT",{}]"#, hex_ok("").replace(&"a".repeat(64), &"A".repeat(64))),
            Want::Ok("invalid: pubkey"),
        ),
        (
            "EVENT bad sig hex",
            format!(r#"["EVENT",{}]"#, hex_ok("").replace(&"b".repeat(128), "bb")),
            Want::Ok("invalid: sig"),
        ),
        (
            "EVENT too many tags",
            format!(r#"["EVENT",{}]"#, event_json(&many_tags, "x")),
            Want::Ok("invalid: too many tags"),
        ),
        (
            "EVENT huge tag value",
            format!(r#"["EVENT",{}]"#, event_json(&[&["t", &huge]], "x")),
            Want::Ok("invalid: tag element"),
        ),
        (
            "EVENT empty tag",
            format!(r#"["EVENT",{}]"#, event_json(&[&[]], "x")),
            Want::Ok("invalid: empty tag"),
        ),
        (
            "EVENT content too long",
            format!(r#"["EVENT",{}]"#, event_json(&[], &big_content)),
            Want::Ok("invalid: content"),
        ),
        ("EVENT valid", format!(r#"["EVENT",{valid}]"#), Want::Event),
        ("EVENT valid with spaces", format!(" [ \"EVENT\" , {valid} ] \n"), Want::Event),
        ("EVENT escaped type", format!(r#"["\u0045VENT",{valid}]"#), Want::Event),
        ("AUTH valid", format!(r#"["AUTH",{auth}]"#), Want::Auth),
        ("AUTH arity", r#"["AUTH"]"#.into(), Want::Notice("invalid: ")),
        ("AUTH challenge string", r#"["AUTH","challenge"]"#.into(), Want::Notice("invalid: ")),
        ("AUTH unknown field", format!(r#"["AUTH",{}]"#, hex_ok(r#","x":1"#)), Want::Ok("invalid: ")),
        ("REQ no sub id", r#"["REQ"]"#.into(), Want::Notice("invalid: ")),
        ("REQ sub id not string", r#"["REQ",1,{}]"#.into(), Want::Notice("invalid: ")),
        ("REQ empty sub id", r#"["REQ","",{}]"#.into(), Want::Notice("invalid: ")),
        ("REQ oversized sub id", long_sub, Want::Notice("invalid: ")),
        ("REQ 64-char sub id", max_sub, Want::Req(1)),
        (
            "REQ no filters",
            r#"["REQ","s"]"#.into(),
            Want::Closed("s", "invalid: REQ needs at least one filter"),
        ),
        (
            "COUNT no filters",
            r#"["COUNT","s"]"#.into(),
            Want::Closed("s", "invalid: COUNT needs at least one filter"),
        ),
        ("REQ too many filters", twelve_filters, Want::Closed("s", "invalid: too many filters")),
        (
            "REQ filter not object",
            r#"["REQ","s",[]]"#.into(),
            Want::Closed("s", "invalid: filter is not an object"),
        ),
        (
            "REQ unknown filter field",
            r#"["REQ","s",{"nonce":"x"}]"#.into(),
            Want::Closed("s", "unsupported: filter field \"nonce\""),
        ),
        ("REQ bad ids", r#"["REQ","s",{"ids":["ABC"]}]"#.into(), Want::Closed("s", "invalid: ")),
        ("REQ negative since", r#"["REQ","s",{"since":-1}]"#.into(), Want::Closed("s", "invalid: ")),
        (
            "REQ multi-char tag",
            r##"["REQ","s",{"#title":["x"]}]"##.into(),
            Want::Closed("s", "unsupported: multi-character tag filters need an artifact query"),
        ),
        (
            "REQ multi-char tag with artifact",
            r##"["REQ","s",{"#title":["x"],"artifact":"current"}]"##.into(),
            Want::Req(1),
        ),
        (
            "REQ huge tag filter value",
            format!(r##"["REQ","s",{{"#t":["{huge}"]}}]"##),
            Want::Closed("s", "invalid: "),
        ),
        (
            "REQ valid",
            r##"["REQ","sub1",{"kinds":[9],"#h":["g"],"limit":0},{"ids":[]}]"##.into(),
            Want::Req(2),
        ),
        ("COUNT valid", r#"["COUNT","c",{"kinds":[1]}]"#.into(), Want::Count(1)),
        ("COUNT bad filter", r#"["COUNT","c",{"kinds":"1"}]"#.into(), Want::Closed("c", "invalid: ")),
        ("CLOSE valid", r#"["CLOSE","sub1"]"#.into(), Want::Close("sub1")),
        ("CLOSE no id", r#"["CLOSE"]"#.into(), Want::Notice("invalid: ")),
        ("CLOSE two ids", r#"["CLOSE","a","b"]"#.into(), Want::Notice("invalid: ")),
        ("CLOSE id not string", r#"["CLOSE",5]"#.into(), Want::Notice("invalid: ")),
    ];

    for (name, text, want) in cases {
        let got = ClientMessage::parse(&text, &limits);
        let ok = match (&want, &got) {
            (Want::Event, Ok(ClientMessage::Event(e))) | (Want::Auth, Ok(ClientMessage::Auth(e))) => {
                e.verify().is_ok()
            }
            (Want::Req(n), Ok(ClientMessage::Req { filters, .. }))
            | (Want::Count(n), Ok(ClientMessage::Count { filters, .. })) => filters.len() == *n,
            (Want::Close(s), Ok(ClientMessage::Close(got))) => got == s,
            (Want::Notice(p), Err(ParseError::Notice(text))) => text.starts_with(p),
            (Want::Ok(p), Err(ParseError::Ok { id: got_id, reason })) => {
                reason.starts_with(p) && got_id.as_str().len() == 64
            }
            (Want::Closed(s, p), Err(ParseError::Closed { sub_id, reason })) => {
                sub_id == s && reason.starts_with(p)
            }
            _ => false,
        };
        assert!(ok, "case {name:?}: wanted {want:?}, got {got:?}");
    }
}

#[test]
fn events_with_nul_or_a_far_future_created_at_are_refused_with_their_id() {
    let limits = Limits::default();
    let keys = Keys::generate();
    let reason = |ev: &Event, kind: &str| match ClientMessage::parse(
        &format!(r#"["{kind}",{}]"#, ev.to_json()),
        &limits,
    ) {
        Err(ParseError::Ok { id, reason }) if id == ev.id => reason,
        other => panic!("{other:?}"),
    };
    let nul_tag = keys.sign_new(9, vec![vec!["t\0".into(), "x".into()]], "");
    assert_eq!(reason(&nul_tag, "EVENT"), "invalid: tag name must not contain NUL (U+0000)");
    let nul_content = keys.sign_new(9, vec![], "\0");
    assert_eq!(reason(&nul_content, "EVENT"), "invalid: content must not contain NUL (U+0000)");
    assert!(reason(&nul_tag, "AUTH").contains("NUL"));
    let at = |created_at: i64| {
        keys.sign(crate::event::UnsignedEvent {
            pubkey: String::new(),
            created_at,
            kind: 9,
            tags: vec![],
            content: String::new(),
        })
    };
    let now = crate::clock::unix_now();
    assert!(reason(&at(now + 3600), "EVENT").starts_with("invalid: created_at is too far in the future"));
    assert!(reason(&at(i64::MAX), "EVENT").starts_with("invalid: created_at"));
    assert!(reason(&at(-5), "EVENT").starts_with("invalid: created_at must not be negative"));
    assert!(ClientMessage::parse(&format!(r#"["EVENT",{}]"#, at(now + 60).to_json()), &limits).is_ok());
    let strict = Limits { created_at_upper_limit: 10, ..Limits::default() };
    assert!(ClientMessage::parse(&format!(r#"["EVENT",{}]"#, at(now + 60).to_json()), &strict).is_err());
    // AUTH has its own window (NIP-42), checked after the signature.
    assert!(ClientMessage::parse(&format!(r#"["AUTH",{}]"#, at(now + 3600).to_json()), &limits).is_ok());
}
