//! Reason prefixes, id recovery and relay message serialisation.

use super::*;

#[test]
fn every_reason_has_a_prefix() {
    let limits = Limits::default();
    let inputs = [
        "",
        "null",
        "[]",
        "[null]",
        r#"["X"]"#,
        r#"["EVENT",1]"#,
        r#"["EVENT",{"id":1}]"#,
        r#"["REQ","s",{"a":1}]"#,
        r##"["REQ","s",{"#":[]}]"##,
        r#"["CLOSE"]"#,
        r#"["COUNT",{}]"#,
    ];
    for text in inputs {
        let reason = match ClientMessage::parse(text, &limits) {
            Err(
                ParseError::Notice(r)
                | ParseError::Ok { reason: r, .. }
                | ParseError::Closed { reason: r, .. },
            ) => r,
            Ok(m) => panic!("{text:?} parsed as {m:?}"),
        };
        assert!(
            ["invalid: ", "unsupported: ", "error: "].iter().any(|p| reason.starts_with(p)),
            "{text:?} -> {reason:?}"
        );
    }
}

#[test]
fn ok_reason_carries_recovered_id() {
    let id = "e".repeat(64);
    let text = format!(r#"["EVENT",{{"id":"{id}","content":5}}]"#);
    match ClientMessage::parse(&text, &Limits::default()) {
        Err(ParseError::Ok { id: got, reason }) => {
            assert_eq!(got, id);
            assert!(!reason.contains("line 1"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_type_is_shortened() {
    let text = format!(r#"["{}"]"#, "Z".repeat(1000));
    let Err(ParseError::Notice(reason)) = ClientMessage::parse(&text, &Limits::default()) else {
        panic!("expected notice");
    };
    assert!(reason.len() < 100, "{reason}");
}

#[test]
fn relay_messages() {
    let cases = [
        (
            RelayMessage::Event { sub_id: "s\"1".into(), event_json: r#"{"id":"x"}"#.into() },
            r#"["EVENT","s\"1",{"id":"x"}]"#,
        ),
        (
            RelayMessage::Ok {
                id: crate::ids::EventId::parse(&"ab".repeat(32)).unwrap(),
                accepted: true,
                message: String::new(),
            },
            &format!(r#"["OK","{}",true,""]"#, "ab".repeat(32)),
        ),
        (
            RelayMessage::Ok {
                id: crate::ids::EventId::parse(&"ab".repeat(32)).unwrap(),
                accepted: false,
                message: "invalid: \n".into(),
            },
            &format!(r#"["OK","{}",false,"invalid: \n"]"#, "ab".repeat(32)),
        ),
        (RelayMessage::Eose("s".into()), r#"["EOSE","s"]"#),
        (
            RelayMessage::Closed { sub_id: "s".into(), message: "error: x".into() },
            r#"["CLOSED","s","error: x"]"#,
        ),
        (RelayMessage::Notice("a\\b".into()), r#"["NOTICE","a\\b"]"#),
        (RelayMessage::Auth("chal".into()), r#"["AUTH","chal"]"#),
        (RelayMessage::Count { sub_id: "s".into(), count: 42 }, r#"["COUNT","s",{"count":42}]"#),
    ];
    for (msg, want) in cases {
        let json = msg.to_json();
        assert_eq!(json, want);
        assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok());
    }
}
