//! Table-driven bad input through a real gateway: each case gets its specific NOTICE, OK false or
//! CLOSED; the socket survives; nothing is stored; nothing panics.

#![allow(clippy::unwrap_used)]

use buzz_core::Keys;
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::Cluster;
use serde_json::{json, Value};
use uuid::Uuid;

/// How the relay must answer: the message type and a prefix of its reason.
#[derive(Debug)]
enum Expect {
    Notice(&'static str),
    Ok(&'static str),
    Closed(&'static str),
}

fn case(name: &'static str, frame: String, expect: Expect) -> (&'static str, String, Expect) {
    (name, frame, expect)
}

fn signed(keys: &Keys, channel: Uuid, edit: impl Fn(&mut Value)) -> String {
    let mut v = serde_json::to_value(message(keys, channel, "hello")).unwrap();
    edit(&mut v);
    json!(["EVENT", v]).to_string()
}

/// A signed message whose `field` is written as the raw JSON `text` (shapes `json!` cannot
/// write, such as `1e9`).
fn raw_field(keys: &Keys, channel: Uuid, field: &str, text: &str) -> String {
    let v = serde_json::to_value(message(keys, channel, "hello")).unwrap();
    let frame = json!(["EVENT", v]).to_string();
    let member = format!("\"{field}\":{}", v[field]);
    assert!(frame.contains(&member), "{frame}");
    frame.replace(&member, &format!("\"{field}\":{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_bad_input_gets_its_specific_answer_and_the_socket_survives() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    assert!(c.publish(&create_channel(&alice, channel, "general", "open")).await.0);
    let max = 131_072;
    let many_filters: Vec<Value> = (0..11).map(|_| json!({"kinds": [9]})).collect();
    let mut too_many = vec![json!("REQ"), json!("f")];
    too_many.extend(many_filters);
    let huge_tag = alice.sign_new(
        9,
        vec![vec!["h".into(), channel.to_string()], vec!["x".into(), "v".repeat(2000)]],
        "",
    );
    let many_tags = alice.sign_new(9, (0..300).map(|i| vec!["t".into(), i.to_string()]).collect(), "");

    let cases = vec![
        case("invalid json", "[\"EVENT\", {".into(), Expect::Notice("invalid:")),
        case("not an array", "{\"a\":1}".into(), Expect::Notice("invalid:")),
        case("empty array", "[]".into(), Expect::Notice("invalid:")),
        case("unknown message type", "[\"PUBLISH\", 1]".into(), Expect::Notice("unsupported:")),
        case("EVENT without event", "[\"EVENT\"]".into(), Expect::Notice("invalid:")),
        case("CLOSE wrong arity", "[\"CLOSE\"]".into(), Expect::Notice("invalid:")),
        case("REQ without filters", "[\"REQ\", \"s\"]".into(), Expect::Closed("invalid:")),
        case("REQ filter not an object", "[\"REQ\", \"s\", 5]".into(), Expect::Closed("invalid:")),
        case(
            "REQ unknown filter field",
            "[\"REQ\", \"s\", {\"nonce\": \"x\"}]".into(),
            Expect::Closed("unsupported:"),
        ),
        case(
            "REQ bad hex in ids",
            "[\"REQ\", \"s\", {\"ids\": [\"XYZ\"]}]".into(),
            Expect::Closed("invalid:"),
        ),
        case(
            "too many filters",
            Value::Array(too_many).to_string(),
            Expect::Closed("invalid: too many filters"),
        ),
        case(
            "oversized message",
            format!("[\"NOTICE\", \"{}\"]", "a".repeat(max + 10)),
            Expect::Notice("invalid: message too large"),
        ),
        case(
            "bad hex pubkey",
            signed(&alice, channel, |v| v["pubkey"] = json!(alice.public_hex().to_uppercase())),
            Expect::Ok("invalid:"),
        ),
        case(
            "wrong id",
            signed(&alice, channel, |v| v["content"] = json!("tampered")),
            Expect::Ok("invalid: event id does not match"),
        ),
        case(
            "bad signature",
            signed(&alice, channel, |v| {
                let sig = v["sig"].as_str().unwrap();
                let flipped = if sig.starts_with('0') { "1" } else { "0" };
                v["sig"] = json!(format!("{flipped}{}", &sig[1..]));
            }),
            Expect::Ok("invalid: bad signature"),
        ),
        case(
            "unknown event field",
            signed(&alice, channel, |v| v["extra"] = json!(1)),
            Expect::Ok("invalid: unknown event field \"extra\""),
        ),
        case(
            "created_at in scientific notation",
            raw_field(&alice, channel, "created_at", "1.7e9"),
            Expect::Ok("invalid: created_at must be an integer (unix seconds)"),
        ),
        case(
            "created_at as a string",
            raw_field(&alice, channel, "created_at", "\"1700000000\""),
            Expect::Ok("invalid: created_at must be an integer (unix seconds)"),
        ),
        case(
            "created_at beyond 64 bits",
            raw_field(&alice, channel, "created_at", "99999999999999999999999"),
            Expect::Ok("invalid: created_at is too far in the future"),
        ),
        case(
            "kind as a float",
            raw_field(&alice, channel, "kind", "9.0"),
            Expect::Ok("invalid: kind must be an integer from 0 to 4294967295"),
        ),
        case(
            "missing sig",
            signed(&alice, channel, |v| {
                v.as_object_mut().unwrap().remove("sig");
            }),
            Expect::Ok("invalid: missing event field sig"),
        ),
        case("huge tag value", json!(["EVENT", huge_tag]).to_string(), Expect::Ok("invalid:")),
        case("too many tags", json!(["EVENT", many_tags]).to_string(), Expect::Ok("invalid:")),
        case(
            "another author's event",
            json!(["EVENT", message(&Keys::generate(), channel, "x")]).to_string(),
            Expect::Ok("restricted:"),
        ),
        case(
            "unsupported kind",
            json!(["EVENT", alice.sign_new(1, vec![], "note")]).to_string(),
            Expect::Ok("blocked:"),
        ),
        case(
            "message without channel",
            json!(["EVENT", alice.sign_new(9, vec![], "x")]).to_string(),
            Expect::Ok("invalid:"),
        ),
        case(
            "message into a missing channel",
            json!(["EVENT", message(&alice, Uuid::new_v4(), "x")]).to_string(),
            Expect::Ok("restricted:"),
        ),
    ];
    for (name, frame, expect) in cases {
        c.send_raw(&frame).await;
        let got = c
            .wait_for(|v| matches!(v[0].as_str(), Some("NOTICE" | "OK" | "CLOSED")))
            .await
            .unwrap_or_else(|| panic!("{name}: no answer"));
        let (kind, reason) = match got[0].as_str().unwrap() {
            "NOTICE" => ("NOTICE", got[1].as_str().unwrap().to_owned()),
            "OK" => {
                assert_eq!(got[2], false, "{name}: accepted");
                ("OK", got[3].as_str().unwrap().to_owned())
            }
            _ => ("CLOSED", got[2].as_str().unwrap().to_owned()),
        };
        let (want_kind, prefix) = match expect {
            Expect::Notice(p) => ("NOTICE", p),
            Expect::Ok(p) => ("OK", p),
            Expect::Closed(p) => ("CLOSED", p),
        };
        assert_eq!(kind, want_kind, "{name}: got {got}");
        assert!(reason.starts_with(prefix), "{name}: reason {reason:?} does not start with {prefix:?}");
        // The socket survives: a valid request still works.
        assert_eq!(c.count("alive", &[json!({"kinds": [9]})]).await, Ok(0), "{name}: socket did not survive");
    }

    // Too many subscriptions: the 33rd open REQ is refused, the earlier ones stay.
    for i in 0..32 {
        assert!(c.req(&format!("s{i}"), &[json!({"kinds": [9]})]).await.closed.is_none());
    }
    let refused = c.req("one-too-many", &[json!({"kinds": [9]})]).await;
    assert!(refused.closed.unwrap().starts_with("invalid: too many subscriptions"));
    // Replacing an existing id is still allowed.
    assert!(c.req("s0", &[json!({"kinds": [9]})]).await.closed.is_none());

    // Nothing but the channel creation was stored, and every service still answers.
    // (The relay's own 39000/39002 for the channel are not client input.)
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE pubkey <> $1")
        .bind(cluster.relay.public_hex())
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(stored, 1);
    let mut other = WsClient::authed(cluster.gateways[1], &team.host, &alice).await;
    assert!(other.publish(&message(&alice, channel, "still works")).await.0);
    cluster.stop().await;
}
