//! NIP-AR snapshot requests as the snapshot-service reads them: the filter of `POST /query`
//! (`action::parse`), tokens and cursors, stored manifest pages and the frame chunker.
//! First byte: 0 a filter (JSON), 1 a token, 2 a cursor, 3 a packed page, 4 a body record,
//! 5 a body cut into frame chunks (next byte: the budget). Asserts: no panic; an accepted action
//! written back parses to the same action; errors are `snapshot_invalid` or `snapshot_limit`;
//! tokens and cursors decode only from their one encoding; pages and body records round-trip;
//! chunks rejoin to the body, each within the budget.
#![no_main]

use buzz_bus::snapshot::SnapshotCode;
use buzz_snapshot::action::{self, Action};
use buzz_snapshot::manifest::{self, Cursor, Entry, Token};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fn written(action: &Action) -> Value {
    match action {
        Action::Start { query } => {
            json!({"artifact": "snapshot", "action": "start", "query": query.to_value()})
        }
        Action::Page { token, cursor } => {
            json!({"artifact": "snapshot", "action": "page", "token": token.encode(), "cursor": cursor.encode()})
        }
        Action::Bodies { token, revisions } => json!({
            "artifact": "snapshot", "action": "bodies", "token": token.encode(),
            "revisionIds": revisions.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
        }),
        Action::Complete { token } => {
            json!({"artifact": "snapshot", "action": "complete", "token": token.encode()})
        }
    }
}

fn escaped_len(s: &str) -> usize {
    serde_json::to_string(s).map_or(0, |j| j.len() - 2)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let text = std::str::from_utf8(rest);
    match mode {
        0 => {
            let Ok(value) = serde_json::from_slice::<Value>(rest) else { return };
            match action::parse(&value) {
                Ok(a) => {
                    let again = written(&a);
                    assert_eq!(action::parse(&again), Ok(a), "round trip of {again}");
                }
                Err(code) => assert!(
                    matches!(code, SnapshotCode::SnapshotInvalid | SnapshotCode::SnapshotLimit),
                    "{code:?}"
                ),
            }
        }
        1 => {
            let Ok(s) = text else { return };
            match Token::decode(s) {
                Ok(t) => assert_eq!(t.encode(), s),
                Err(code) => assert_eq!(code, SnapshotCode::SnapshotInvalid),
            }
        }
        2 => {
            let Ok(s) = text else { return };
            match Cursor::decode(s) {
                Ok(c) => assert_eq!(c.encode(), s),
                Err(code) => assert_eq!(code, SnapshotCode::SnapshotInvalid),
            }
        }
        3 => match manifest::unpack(rest) {
            Ok(entries) => {
                assert_eq!(entries.len() * manifest::ENTRY_BYTES, rest.len());
                assert_eq!(manifest::pages(&entries).concat(), rest);
                let json = manifest::entries_json(&entries);
                assert!(serde_json::from_str::<Value>(&json).is_ok());
            }
            Err(code) => assert_eq!(code, SnapshotCode::SnapshotReset),
        },
        4 => {
            if let Some((d, channel)) = manifest::body_record(rest) {
                let entry = Entry { d, revision: [0; 32], channel };
                assert_eq!(entry.body_record(), rest);
            } else {
                assert_ne!(rest.len(), 32);
            }
        }
        5 => {
            let Some((&budget, body)) = rest.split_first() else { return };
            let Ok(body) = std::str::from_utf8(body) else { return };
            let budget = usize::from(budget).max(6);
            let pieces: Vec<&str> = buzz_snapshot::chunks(body, budget).collect();
            assert_eq!(pieces.concat(), body);
            for p in &pieces {
                assert!(!p.is_empty());
                assert!(escaped_len(p) <= budget, "{p:?} over {budget}");
            }
        }
        _ => {}
    }
});
