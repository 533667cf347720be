//! Writes the seed corpora `fuzz/corpus/<target>/` (run by `scripts/fuzz.sh --seeds`) and exits:
//! the JSON literals of the project's unit tests (raw strings and `json!` bodies that are plain
//! JSON), host names of the host tests, and inputs built from the fixed keys of `buzz_fuzz`
//! (signed events, NIP-98 headers, NIP-AR envelopes, snapshot actions, operator bodies, FI
//! evidence) that mirror the tests' vectors. Files are named by the sha256 of their content, so
//! the same input is never written twice. It is built as a fuzz target (cargo-fuzz's flags need
//! libFuzzer linked in) whose one-time `init` does the work and exits before any fuzzing.
#![no_main]

use std::path::{Path, PathBuf};

use base64::Engine as _;
use buzz_core::{nip98, Keys, UnsignedEvent};
use buzz_fuzz::{keys, sign_jws, HOST, ISSUER, NOW};
use buzz_snapshot::manifest::{Cursor, Entry, Token};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

struct Seeds {
    root: PathBuf,
    repo: PathBuf,
}

impl Seeds {
    fn put(&self, target: &str, data: impl AsRef<[u8]>) {
        let data = data.as_ref();
        let dir = self.root.join(target);
        std::fs::create_dir_all(&dir).expect("create corpus dir");
        let name = hex::encode(&Sha256::digest(data)[..10]);
        std::fs::write(dir.join(name), data).expect("write seed");
    }
    fn put_mode(&self, target: &str, mode: u8, data: impl AsRef<[u8]>) {
        let mut v = vec![mode];
        v.extend_from_slice(data.as_ref());
        self.put(target, v);
    }
    fn source(&self, path: &str) -> String {
        std::fs::read_to_string(self.repo.join(path)).unwrap_or_default()
    }
}

/// The `r#"..."#` literals of a Rust source that parse as JSON.
fn raw_json_literals(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(start) = rest.find("r#\"") {
        rest = &rest[start + 3..];
        let Some(end) = rest.find("\"#") else { break };
        let lit = &rest[..end];
        if serde_json::from_str::<Value>(lit).is_ok() {
            out.push(lit.to_owned());
        }
        rest = &rest[end + 2..];
    }
    out
}

/// The bodies of `json!(...)` in a Rust source that are plain JSON.
fn json_macro_bodies(src: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, _) in src.match_indices("json!(") {
        let body = &src[i + 6..];
        let mut depth = 1usize;
        let mut end = None;
        let mut in_str = false;
        let mut escaped = false;
        for (j, c) in body.char_indices() {
            match (in_str, c) {
                (true, '\\') if !escaped => {
                    escaped = true;
                    continue;
                }
                (true, '"') if !escaped => in_str = false,
                (false, '"') => in_str = true,
                (false, '(' | '[' | '{') => depth += 1,
                (false, ')' | ']' | '}') => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(j);
                        break;
                    }
                }
                _ => {}
            }
            escaped = false;
        }
        if let Some(v) = end.and_then(|e| serde_json::from_str::<Value>(&body[..e]).ok()) {
            out.push(v);
        }
    }
    out
}

fn sign(keys: &Keys, kind: u32, tags: &[&[&str]], content: &str) -> buzz_core::Event {
    keys.sign(UnsignedEvent {
        pubkey: keys.public_hex(),
        created_at: NOW,
        kind,
        tags: tags.iter().map(|t| t.iter().map(|s| (*s).to_owned()).collect()).collect(),
        content: content.to_owned(),
    })
}

const D: &str = "3f1c2a9e-5b7d-4c1e-9a2b-6d8e0f1a2b3c";
const H: &str = "a1b2c3d4-e5f6-4789-8abc-def012345678";
const H2: &str = "0b1c2d3e-4f50-4617-8283-949596979899";

fn revision_tags(op: &str, prev: Option<&str>) -> Vec<Vec<String>> {
    let mut tags = vec![
        vec!["ar".into(), "1".into()],
        vec!["d".into(), D.into()],
        vec!["h".into(), if op == "move" { H2 } else { H }.into()],
        vec!["type".into(), "buzz.task".into()],
        vec!["op".into(), op.into()],
        vec!["status".into(), "open".into()],
    ];
    if op != "delete" {
        tags.push(vec!["title".into(), "Ship the fuzzers".into()]);
    } else {
        tags.pop();
    }
    if let Some(p) = prev {
        tags.push(vec!["prev".into(), p.into()]);
    }
    tags
}

fn events(s: &Seeds) -> Vec<buzz_core::Event> {
    let k = keys();
    let mut out = vec![
        sign(&k, 1, &[], "hello"),
        sign(&k, 9, &[&["h", H]], "a kind-9 message"),
        sign(&k, 9, &[&["h", H], &["e", &"ab".repeat(32), "", "reply"], &["p", &k.public_hex()]], "re"),
        sign(
            &k,
            9007,
            &[&["h", H], &["name", "general"], &["visibility", "public"], &["channel_type", "stream"]],
            "",
        ),
        sign(&k, 22242, &[&["relay", "wss://relay.example.com"], &["challenge", "abc"]], ""),
        sign(&k, 27235, &[&["u", "https://relay.example.com/api/channels"], &["method", "GET"]], ""),
        sign(&k, 1, &[&["t", "x"]], "a\"b\\c\nd\te\u{1}f/é"),
    ];
    let create = keys().sign(UnsignedEvent {
        pubkey: k.public_hex(),
        created_at: NOW,
        kind: 45010,
        tags: revision_tags("create", None),
        content: "{\"body\":\"task\"}".into(),
    });
    let prev = create.id.to_string();
    out.push(create);
    for op in ["update", "move", "delete", "restore"] {
        let content = if op == "delete" { "" } else { "{}" };
        out.push(k.sign(UnsignedEvent {
            pubkey: k.public_hex(),
            created_at: NOW + 1,
            kind: 45010,
            tags: revision_tags(op, Some(&prev)),
            content: content.into(),
        }));
    }
    for lit in raw_json_literals(&s.source("core/src/event/tests.rs")) {
        if let Ok(e) = serde_json::from_str::<buzz_core::Event>(&lit) {
            out.push(e);
        }
    }
    out
}

fn client_messages(s: &Seeds, events: &[buzz_core::Event]) {
    for e in events {
        s.put("client_message", format!("[\"EVENT\",{}]", e.to_json()));
    }
    s.put("client_message", format!("[\"AUTH\",{}]", events[4].to_json()));
    for m in [
        r##"["REQ","sub",{"kinds":[9],"#h":["a1b2c3d4-e5f6-4789-8abc-def012345678"],"limit":50}]"##,
        r##"["REQ","s",{"artifact":"current","#type":["buzz.task"],"#status":["open"],"limit":20,"offset":0}]"##,
        r##"["REQ","h",{"artifact":"history","#d":["3f1c2a9e-5b7d-4c1e-9a2b-6d8e0f1a2b3c"]}]"##,
        r#"["COUNT","c",{"kinds":[1,9],"since":0,"until":1700000000},{"authors":["1111111111111111111111111111111111111111111111111111111111111111"]}]"#,
        r#"["CLOSE","sub"]"#,
        r#"["REQ","s",{"artifact":"snapshot","action":"start"}]"#,
        r#"["EVENT",{"id":"0000000000000000000000000000000000000000000000000000000000000000","kind":1}]"#,
    ] {
        s.put("client_message", m);
    }
    for path in [
        "core/src/message/tests.rs",
        "core/src/message/reply_tests.rs",
        "core/src/message/malformed_tests.rs",
    ] {
        for lit in raw_json_literals(&s.source(path)) {
            s.put("client_message", lit);
        }
    }
}

fn event_seeds(s: &Seeds, events: &[buzz_core::Event]) {
    for e in events {
        s.put("event", e.to_json());
    }
    let mut bad = events[0].clone();
    bad.content.push('!');
    s.put("event", bad.to_json());
}

fn filters(s: &Seeds, events: &[buzz_core::Event]) {
    let mut values = json_macro_bodies(&s.source("core/src/filter/tests.rs"));
    values.extend([
        json!({"kinds": [9], "#h": [H], "limit": 50}),
        json!({"ids": [events[0].id.as_str()], "authors": [events[0].pubkey.as_str()]}),
        json!({"artifact": "current", "#type": ["buzz.task"], "#h": [H], "limit": 10, "offset": 5}),
        json!({"artifact": "history", "#d": [D]}),
        json!({"since": 1_700_000_000, "until": 1_700_000_001, "kinds": [45010]}),
    ]);
    values.dedup();
    for v in values.iter().take(40) {
        s.put("filter", v.to_string());
    }
    for (f, e) in [(&values[values.len() - 5], &events[1]), (&values[values.len() - 3], &events[7])] {
        s.put(
            "filter",
            json!([f, serde_json::from_str::<Value>(&e.to_json()).unwrap_or_default()]).to_string(),
        );
    }
}

fn nipar(s: &Seeds, events: &[buzz_core::Event]) {
    for e in events.iter().filter(|e| e.kind == 45010) {
        s.put("nipar", e.to_json());
        s.put("nipar", serde_json::to_string(&e.tags).unwrap_or_default());
    }
    let mut dup = revision_tags("create", None);
    dup.push(vec!["h".into(), H2.into()]);
    s.put("nipar", serde_json::to_string(&dup).unwrap_or_default());
    let mut auth = revision_tags("create", None);
    auth.push(vec!["auth".into(), "11".repeat(32), "kind=45010".into(), "22".repeat(64)]);
    s.put("nipar", serde_json::to_string(&auth).unwrap_or_default());
}

fn nip98_seeds(s: &Seeds) {
    let k = keys();
    for (method, url, body) in [
        ("GET", "https://relay.example.com/api/channels", ""),
        (
            "POST",
            "https://relay.example.com/query",
            r#"{"artifact":"snapshot","action":"start","query":{"artifact":"current"}}"#,
        ),
        (
            "PATCH",
            "http://127.0.0.1:7070/operator/communities?community_id=a1b2c3d4-e5f6-4789-8abc-def012345678",
            r#"{"retention_days":30}"#,
        ),
    ] {
        let header = nip98::authorization_header(&k, method, url, body.as_bytes());
        s.put_mode("nip98", 0, format!("{header}\n{method}\n{url}\n{body}"));
        s.put_mode("nip98", 1, format!("{method}\n{url}\n{body}"));
    }
    let e = sign(
        &k,
        27235,
        &[&["u", "https://relay.example.com/"], &["method", "GET"], &["payload", &"e3".repeat(32)]],
        "",
    );
    let header = format!("nostr {}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(e.to_json()));
    s.put_mode("nip98", 0, format!("{header}\nGET\nhttps://relay.example.com/\n"));
    s.put_mode("nip98", 0, "Nostr e30=\nGET\nhttps://relay.example.com/\n");
}

fn nip42_seeds(s: &Seeds, events: &[buzz_core::Event]) {
    s.put_mode("nip42", 0, format!("{}\nabc\n{HOST}", events[4].to_json()));
    for (challenge, host, relay) in [
        ("abc", HOST, "wss://relay.example.com"),
        ("abc", "Relay.Example.com.:443", "WSS://relay.example.com/"),
        ("c", "localhost:7777", "ws://localhost:7777/"),
        ("c", "[::1]:7777", "ws://[0:0:0:0:0:0:0:1]:7777"),
        ("c", HOST, "wss://relay.example.com/path"),
    ] {
        s.put_mode("nip42", 1, format!("{challenge}\n{host}\n{relay}"));
    }
}

fn hosts(s: &Seeds) {
    let src = s.source("core/src/host.rs");
    let mut n = 0;
    for part in src.split("(\"").skip(1) {
        if let Some((lit, _)) = part.split_once('"') {
            s.put("host", lit);
            n += 1;
        }
    }
    for h in [
        "Team.Example.com",
        "xn--bcher-kva.example",
        "127.1.2.3:8080",
        "[2001:DB8::1]:8443",
        "a-.test",
        "my_host",
    ] {
        s.put("host", h);
    }
    assert!(n > 10, "host test vectors not found");
}

fn snapshot(s: &Seeds) {
    let token = Token { generation: 7, secret: [5; 16] };
    let cursor = Cursor { generation: 7, page: 2 };
    for v in json_macro_bodies(&s.source("snapshot-service/src/action.rs")) {
        s.put_mode("snapshot", 0, v.to_string());
    }
    for v in [
        json!({"artifact":"snapshot","action":"start","query":{"artifact":"current","#type":["buzz.task"],"#h":[H]}}),
        json!({"artifact":"snapshot","action":"page","token":token.encode(),"cursor":cursor.encode()}),
        json!({"artifact":"snapshot","action":"bodies","token":token.encode(),"revisionIds":["ab".repeat(32), "cd".repeat(32)]}),
        json!({"artifact":"snapshot","action":"complete","token":token.encode()}),
    ] {
        s.put_mode("snapshot", 0, v.to_string());
    }
    s.put_mode("snapshot", 1, token.encode());
    s.put_mode("snapshot", 2, cursor.encode());
    let d = uuid::Uuid::parse_str(D).unwrap_or_default();
    let h = uuid::Uuid::parse_str(H).unwrap_or_default();
    let entry = Entry { d, revision: [0xab; 32], channel: buzz_core::ChannelId(h) };
    let page = buzz_snapshot::manifest::pages(&[entry, entry]).concat();
    s.put_mode("snapshot", 3, page);
    s.put_mode("snapshot", 4, entry.body_record());
    s.put_mode("snapshot", 5, b"\x40{\"id\":\"x\",\"content\":\"line\\nbreak \xc3\xa9\"}".as_slice());
}

fn operator(s: &Seeds) {
    let k = keys().public_hex();
    let bodies: [(u8, Value); 10] = [
        (0, json!({"community_id": H, "host": "team.example.com", "owner_pubkey": k, "retention_days": 30})),
        (
            0,
            json!({"community_id": H, "host": "Team.Example.com:8443", "owner_pubkey": k, "retention_days": null}),
        ),
        (
            1,
            json!({"retention_days": 90, "name": "Team", "description": "d", "icon": "https://x.example/i.png"}),
        ),
        (1, json!({"name": null})),
        (2, json!({"host": "new.example.com", "owner_pubkey": k})),
        (
            4,
            json!({"operation_id": D, "community_id": H, "expected_host": "team.example.com", "actor_pubkey": k,
                   "expected_owner_pubkey": k, "requires_nip_fi": true, "expected_policy_generation": 3,
                   "expected_requires_nip_fi": false, "expected_issuer": ISSUER}),
        ),
        (
            4,
            json!({"operation_id": D, "community_id": H, "expected_host": "team.example.com", "actor_pubkey": k,
                   "expected_owner_pubkey": k, "requires_nip_fi": false, "expected_policy_generation": 0,
                   "expected_requires_nip_fi": true}),
        ),
        (
            5,
            json!({"operation_id": D, "community_id": H, "expected_host": "team.example.com", "actor_pubkey": k,
                   "expected_owner_pubkey": k, "expected_issuer": ISSUER}),
        ),
        (7, json!({"community_id": H, "issuer": ISSUER})),
        (7, json!({"community_id": "not-a-uuid"})),
    ];
    for (mode, body) in bodies {
        s.put_mode("operator", mode, body.to_string());
    }
    s.put_mode("operator", 3, format!("community_id={H}"));
    s.put_mode("operator", 6, format!("community_id={H}&expected_host=team.example.com"));
    s.put_mode("operator", 6, format!("operation_id={D}"));
}

fn fi(s: &Seeds) {
    let k = keys().public_hex();
    let exp = NOW + 3600;
    let claims = json!({"iss": ISSUER, "sub": "user-1", "aud": format!("https://{HOST}"), "nostr_pubkey": k, "exp": exp});
    let list = json!({"iss": ISSUER, "sub": "user-1", "aud": ["https://other.example", format!("https://{HOST}")], "nostr_pubkey": k, "exp": exp});
    let es = json!({"alg": "ES256", "kid": "es", "typ": "JWT"}).to_string();
    let ed = json!({"alg": "EdDSA", "kid": "ed"}).to_string();
    s.put_mode("fi_evidence", 0, format!("Bearer {}", sign_jws(true, &es, &claims.to_string())));
    s.put_mode("fi_evidence", 0, format!("bearer {}", sign_jws(false, &ed, &list.to_string())));
    s.put_mode("fi_evidence", 1, format!("{es}\n{claims}"));
    s.put_mode("fi_evidence", 2, format!("{ed}\n{list}"));
    s.put_mode("fi_evidence", 1, format!("{{\"alg\":\"ES256\"}}\n{claims}"));
    s.put_mode("fi_evidence", 2, format!("{{\"alg\":\"none\"}}\n{claims}"));
}

libfuzzer_sys::fuzz_target!(init: write_all(), |_data: &[u8]| {});

/// Writes every target's seeds into `$BUZZ_FUZZ_SEEDS` (default `fuzz/corpus`), then exits.
fn write_all() {
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = std::env::var_os("BUZZ_FUZZ_SEEDS").map_or_else(|| fuzz_dir.join("corpus"), PathBuf::from);
    let s = Seeds { root, repo: fuzz_dir.join("..") };
    let events = events(&s);
    client_messages(&s, &events);
    event_seeds(&s, &events);
    filters(&s, &events);
    nipar(&s, &events);
    nip98_seeds(&s);
    nip42_seeds(&s, &events);
    hosts(&s);
    snapshot(&s);
    operator(&s);
    fi(&s);
    for entry in std::fs::read_dir(&s.root).expect("corpus dir") {
        let dir = entry.expect("entry").path();
        let n = std::fs::read_dir(&dir).map_or(0, Iterator::count);
        println!("{n:4} {}", dir.display());
    }
    std::process::exit(0);
}
