#![allow(clippy::unwrap_used)]

use super::*;
use crate::keys::Keys;
use crate::nipoa;

const D: &str = "04737c81-e5e8-4412-bb47-f446813cfeba";
const H: &str = "9b353519-f4fe-4757-aef4-bec6cc0ae54c";
const H2: &str = "17cfe3ca-b3d0-4a76-a2a4-4eaf0d3a4109";
const NIL: &str = "00000000-0000-0000-0000-000000000000";
const ROOT: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const PREV: &str = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789";

type Tags = Vec<Vec<String>>;

fn tag(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

/// A minimal valid revision's tags for `op`: title except on delete, prev except on create.
fn base(op: &str) -> Tags {
    let mut tags = vec![tag(&["ar", "1"]), tag(&["d", D]), tag(&["h", H]), tag(&["type", "buzz.task"])];
    if op != "delete" {
        tags.push(tag(&["title", "Fix the payment timeout"]));
    }
    tags.push(tag(&["op", op]));
    if op != "create" {
        tags.push(tag(&["prev", PREV]));
    }
    tags
}

/// `tags` with every tag named `name` replaced by `new` (or removed when `new` is `None`).
fn set(mut tags: Tags, name: &str, new: Option<&[&str]>) -> Tags {
    let at = tags.iter().position(|t| t[0] == name);
    tags.retain(|t| t[0] != name);
    if let Some(new) = new {
        tags.insert(at.unwrap_or(tags.len()), tag(new));
    }
    tags
}

fn add(mut tags: Tags, extra: &[&[&str]]) -> Tags {
    tags.extend(extra.iter().map(|t| tag(t)));
    tags
}

fn client_tags(tags: Tags) -> Tags {
    add(tags, &[&["assignee", ROOT], &["project", H2], &["relates-to", D], &["status", "open"]])
}

fn padded(op: &str, total: usize) -> Tags {
    let mut tags = base(op);
    while tags.len() < total {
        tags.push(tag(&["label", "x"]));
    }
    tags
}

/// A valid NIP-OA tag granting `agent` kind-45010 events on behalf of a fresh owner.
fn auth_for(agent: &Keys) -> Vec<String> {
    let owner = Keys::generate();
    let conditions = "kind=45010";
    let sig = owner.sign_digest(&nipoa::grant_digest(nipoa::PREFIX, &agent.public_hex(), conditions));
    vec!["auth".into(), owner.public_hex(), conditions.into(), sig]
}

enum Expect {
    Ok,
    Err(&'static str),
    ErrPrefix(&'static str),
}

struct Case {
    name: &'static str,
    kind: u32,
    tags: Tags,
    content: &'static str,
    expect: Expect,
}

fn case(name: &'static str, tags: Tags, expect: Expect) -> Case {
    Case { name, kind: KIND_REVISION, tags, content: "{\"version\":1}", expect }
}

fn delete_case(name: &'static str, tags: Tags, content: &'static str, expect: Expect) -> Case {
    Case { name, kind: KIND_REVISION, tags, content, expect }
}

#[allow(clippy::too_many_lines)]
fn cases(agent: &Keys) -> Vec<Case> {
    use Expect::{Err, ErrPrefix, Ok};
    let auth = auth_for(agent);
    let auth: Vec<&str> = auth.iter().map(String::as_str).collect();
    let bad_sig = ["auth", ROOT, "kind=45010", ROOT];
    let upper_d = D.to_uppercase();
    let type_128 = format!("a{}", "b".repeat(127));
    let type_129 = format!("a{}", "b".repeat(128));
    let title_512_multibyte = "é".repeat(256);
    let title_513 = format!("{}é", "a".repeat(511)); // 512 chars, 513 bytes
    let title_600_in_200_chars = "€".repeat(200);
    vec![
        // ---- valid revisions ----
        case("create with client tags and root", add(client_tags(base("create")), &[&["root", ROOT]]), Ok),
        case("create minimal", base("create"), Ok),
        case("update with client tags", client_tags(base("update")), Ok),
        case("move to another channel", set(client_tags(base("move")), "h", Some(&["h", H2])), Ok),
        delete_case("delete minimal", base("delete"), "", Ok),
        delete_case("delete keeping root", add(base("delete"), &[&["root", ROOT]]), "", Ok),
        delete_case("delete with a valid auth tag", add(base("delete"), &[&auth]), "", Ok),
        case("restore with client tags", client_tags(base("restore")), Ok),
        case("create by an agent with an auth tag", add(base("create"), &[&auth]), Ok),
        case(
            "envelope tags after client tags",
            client_tags(Vec::new()).into_iter().chain(base("update")).collect(),
            Ok,
        ),
        case("256 tags", padded("create", MAX_TAGS), Ok),
        case("type of 128 bytes", set(base("create"), "type", Some(&["type", type_128.as_str()])), Ok),
        case("type with digits, _ and -", set(base("create"), "type", Some(&["type", "x.a1_b-c.z9"])), Ok),
        case("single-component type", set(base("create"), "type", Some(&["type", "note"])), Ok),
        case(
            "title of 512 multibyte bytes",
            set(base("update"), "title", Some(&["title", title_512_multibyte.as_str()])),
            Ok,
        ),
        case("title with surrounding space", set(base("update"), "title", Some(&["title", "  x  "])), Ok),
        case("empty content outside delete", base("update"), Ok),
        // ---- kind and tag count ----
        Case {
            name: "kind 1",
            kind: 1,
            tags: base("create"),
            content: "",
            expect: Err("kind must be 45010"),
        },
        Case {
            name: "kind 45011",
            kind: KIND_REMOVAL,
            tags: base("create"),
            content: "",
            expect: Err("kind must be 45010"),
        },
        case("257 tags", padded("create", MAX_TAGS + 1), Err("more than 256 tags")),
        case("empty tag", add(base("create"), &[&[]]), Err("empty tag")),
        // ---- ar ----
        case("ar=2", set(base("create"), "ar", Some(&["ar", "2"])), Err("unsupported envelope version ar=2")),
        case(
            "ar=01",
            set(base("create"), "ar", Some(&["ar", "01"])),
            Err("unsupported envelope version ar=01"),
        ),
        case("missing ar", set(base("create"), "ar", None), Err("missing ar tag")),
        case("duplicate ar", add(base("create"), &[&["ar", "1"]]), Err("duplicate ar tag")),
        case(
            "3-element ar",
            set(base("create"), "ar", Some(&["ar", "1", "x"])),
            Err("ar tag must have exactly two elements"),
        ),
        // ---- envelope tag shape and uniqueness ----
        case("duplicate d", add(base("create"), &[&["d", D]]), Err("duplicate d tag")),
        case("second h overriding the home", add(base("update"), &[&["h", H2]]), Err("duplicate h tag")),
        case("duplicate type", add(base("update"), &[&["type", "buzz.other"]]), Err("duplicate type tag")),
        case("duplicate title", add(base("update"), &[&["title", "x"]]), Err("duplicate title tag")),
        case("duplicate op", add(base("update"), &[&["op", "update"]]), Err("duplicate op tag")),
        case(
            "duplicate root",
            add(base("update"), &[&["root", ROOT], &["root", ROOT]]),
            Err("duplicate root tag"),
        ),
        case("duplicate prev", add(base("update"), &[&["prev", PREV]]), Err("duplicate prev tag")),
        case(
            "3-element h",
            set(base("create"), "h", Some(&["h", H, "wss://relay"])),
            Err("h tag must have exactly two elements"),
        ),
        case(
            "1-element d",
            set(base("create"), "d", Some(&["d"])),
            Err("d tag must have exactly two elements"),
        ),
        case(
            "1-element root",
            add(base("create"), &[&["root"]]),
            Err("root tag must have exactly two elements"),
        ),
        case(
            "3-element title",
            set(base("create"), "title", Some(&["title", "a", "b"])),
            Err("title tag must have exactly two elements"),
        ),
        case("missing d", set(base("create"), "d", None), Err("missing d tag")),
        case("missing h", set(base("create"), "h", None), Err("missing h tag")),
        case("missing type", set(base("create"), "type", None), Err("missing type tag")),
        case("missing op", set(base("create"), "op", None), Err("missing op tag")),
        // ---- uuids ----
        case(
            "uppercase d",
            set(base("create"), "d", Some(&["d", upper_d.as_str()])),
            Err("d must be a lowercase hyphenated uuid"),
        ),
        case(
            "uppercase h",
            set(base("create"), "h", Some(&["h", "9B353519-F4FE-4757-AEF4-BEC6CC0AE54C"])),
            Err("h must be a lowercase hyphenated uuid"),
        ),
        case(
            "braced d",
            set(base("create"), "d", Some(&["d", "{04737c81-e5e8-4412-bb47-f446813cfeba}"])),
            Err("d must be a lowercase hyphenated uuid"),
        ),
        case(
            "simple-form d",
            set(base("create"), "d", Some(&["d", "04737c81e5e84412bb47f446813cfeba"])),
            Err("d must be a lowercase hyphenated uuid"),
        ),
        case(
            "urn d",
            set(base("create"), "d", Some(&["d", "urn:uuid:04737c81-e5e8-4412-bb47-f446813cfeba"])),
            Err("d must be a lowercase hyphenated uuid"),
        ),
        case(
            "garbage h",
            set(base("create"), "h", Some(&["h", "general"])),
            Err("h must be a lowercase hyphenated uuid"),
        ),
        case("nil d", set(base("create"), "d", Some(&["d", NIL])), Err("d must not be the nil uuid")),
        case("nil h", set(base("create"), "h", Some(&["h", NIL])), Err("h must not be the nil uuid")),
        // ---- event ids ----
        case(
            "uppercase root hex",
            add(
                base("create"),
                &[&["root", "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789"]],
            ),
            Err("root must be 64 lowercase hex characters"),
        ),
        case(
            "short root",
            add(base("create"), &[&["root", "abcd"]]),
            Err("root must be 64 lowercase hex characters"),
        ),
        case(
            "non-hex prev",
            set(base("update"), "prev", Some(&["prev", &format!("{}g", &PREV[..63])])),
            Err("prev must be 64 lowercase hex characters"),
        ),
        case(
            "65-char prev",
            set(base("update"), "prev", Some(&["prev", &format!("{PREV}0")])),
            Err("prev must be 64 lowercase hex characters"),
        ),
        // ---- type ----
        case(
            "type with uppercase start",
            set(base("create"), "type", Some(&["type", "Buzz.task"])),
            Err("type component must start with a lowercase letter"),
        ),
        case(
            "type with uppercase inside",
            set(base("create"), "type", Some(&["type", "buzz.taSk"])),
            Err("type component may contain only a-z, 0-9, _ and -"),
        ),
        case(
            "type with leading digit",
            set(base("create"), "type", Some(&["type", "buzz.2task"])),
            Err("type component must start with a lowercase letter"),
        ),
        case(
            "type starting with _",
            set(base("create"), "type", Some(&["type", "_buzz"])),
            Err("type component must start with a lowercase letter"),
        ),
        case(
            "type with double dot",
            set(base("create"), "type", Some(&["type", "buzz..task"])),
            Err("type must not have an empty component"),
        ),
        case(
            "type with leading dot",
            set(base("create"), "type", Some(&["type", ".buzz"])),
            Err("type must not have an empty component"),
        ),
        case(
            "type with trailing dot",
            set(base("create"), "type", Some(&["type", "buzz."])),
            Err("type must not have an empty component"),
        ),
        case("empty type", set(base("create"), "type", Some(&["type", ""])), Err("type must not be empty")),
        case(
            "type of 129 bytes",
            set(base("create"), "type", Some(&["type", type_129.as_str()])),
            Err("type exceeds 128 bytes"),
        ),
        case(
            "non-ascii type",
            set(base("create"), "type", Some(&["type", "buzz.tâche"])),
            Err("type component may contain only a-z, 0-9, _ and -"),
        ),
        case(
            "type with space",
            set(base("create"), "type", Some(&["type", "buzz task"])),
            ErrPrefix("type component "),
        ),
        // ---- op ----
        case(
            "unknown op",
            set(base("update"), "op", Some(&["op", "archive"])),
            Err("op must be one of create, update, move, delete, restore"),
        ),
        case(
            "capitalised op",
            set(base("update"), "op", Some(&["op", "Update"])),
            Err("op must be one of create, update, move, delete, restore"),
        ),
        // ---- title ----
        case(
            "empty title",
            set(base("create"), "title", Some(&["title", ""])),
            Err("title must not be blank"),
        ),
        case(
            "whitespace title",
            set(base("update"), "title", Some(&["title", " \t\n\u{3000}"])),
            Err("title must not be blank"),
        ),
        case(
            "title of 513 bytes in 512 chars",
            set(base("update"), "title", Some(&["title", title_513.as_str()])),
            Err("title exceeds 512 bytes"),
        ),
        case(
            "title of 600 bytes in 200 chars",
            set(base("update"), "title", Some(&["title", title_600_in_200_chars.as_str()])),
            Err("title exceeds 512 bytes"),
        ),
        case("missing title on update", set(base("update"), "title", None), Err("missing title tag")),
        case("missing title on create", set(base("create"), "title", None), Err("missing title tag")),
        case("missing title on restore", set(base("restore"), "title", None), Err("missing title tag")),
        delete_case(
            "title present on delete",
            add(base("delete"), &[&["title", "gone"]]),
            "",
            Err("title must be absent on delete"),
        ),
        // ---- prev ----
        case("prev on create", add(base("create"), &[&["prev", PREV]]), Err("prev must be absent on create")),
        case("missing prev on update", set(base("update"), "prev", None), Err("missing prev tag on update")),
        case("missing prev on move", set(base("move"), "prev", None), Err("missing prev tag on move")),
        delete_case(
            "missing prev on delete",
            set(base("delete"), "prev", None),
            "",
            Err("missing prev tag on delete"),
        ),
        case(
            "missing prev on restore",
            set(base("restore"), "prev", None),
            Err("missing prev tag on restore"),
        ),
        // ---- delete shape ----
        delete_case(
            "delete with content",
            base("delete"),
            "{\"version\":1}",
            Err("delete content must be empty"),
        ),
        delete_case(
            "delete with client tag",
            add(base("delete"), &[&["assignee", ROOT]]),
            "",
            Err("client tag assignee on delete"),
        ),
        delete_case(
            "delete with two auth tags",
            add(base("delete"), &[&auth, &auth]),
            "",
            Err("more than one auth tag"),
        ),
        delete_case(
            "delete with malformed auth tag",
            add(base("delete"), &[&["auth", ROOT, "kind=45010"]]),
            "",
            Err("malformed auth tag"),
        ),
        delete_case(
            "delete with uppercase auth owner",
            add(base("delete"), &[&["auth", &PREV.to_uppercase(), "", &format!("{PREV}{PREV}")]]),
            "",
            Err("malformed auth tag"),
        ),
        // ---- auth on other ops ----
        case(
            "create with two auth tags",
            add(base("create"), &[&auth, &auth]),
            Err("more than one auth tag"),
        ),
        case("update with short auth sig", add(base("update"), &[&bad_sig]), Err("malformed auth tag")),
    ]
}

#[test]
fn table() {
    let agent = Keys::generate();
    let mut failures = Vec::new();
    for c in cases(&agent) {
        let event = agent.sign_new(c.kind, c.tags, c.content);
        let got = parse(&event);
        let ok = match (&c.expect, &got) {
            (Expect::Ok, Ok(_)) => true,
            (Expect::Err(want), Err(e)) => e == want,
            (Expect::ErrPrefix(want), Err(e)) => e.starts_with(want),
            _ => false,
        };
        if !ok {
            failures.push(format!("{}: got {got:?}", c.name));
        }
    }
    assert!(failures.is_empty(), "failing cases:\n{}", failures.join("\n"));
}

#[test]
fn every_rule_has_cases() {
    let cases = cases(&Keys::generate());
    let valid = cases.iter().filter(|c| matches!(c.expect, Expect::Ok)).count();
    assert!(valid >= 10 && cases.len() - valid >= 60, "{valid} valid of {}", cases.len());
}

#[test]
fn envelope_fields() {
    let keys = Keys::generate();
    let tags = add(client_tags(base("update")), &[&["root", ROOT]]);
    let env = parse(&keys.sign_new(KIND_REVISION, tags, "{}")).unwrap();
    assert_eq!(
        env,
        Envelope {
            d: Uuid::parse_str(D).unwrap(),
            h: crate::ids::ChannelId::parse(H).unwrap(),
            type_name: "buzz.task".into(),
            title: Some("Fix the payment timeout".into()),
            op: Op::Update,
            root: Some(crate::ids::EventId::parse(ROOT).unwrap()),
            prev: Some(crate::ids::EventId::parse(PREV).unwrap()),
        }
    );

    let env = parse(&keys.sign_new(KIND_REVISION, base("delete"), "")).unwrap();
    assert_eq!(
        (env.op, env.title, env.prev.as_ref().map(crate::ids::EventId::as_str), env.root),
        (Op::Delete, None, Some(PREV), None)
    );

    let env = parse(&keys.sign_new(KIND_REVISION, base("create"), "")).unwrap();
    assert_eq!((env.op, env.prev), (Op::Create, None));
}

#[test]
fn accepted_auth_tag_really_verifies() {
    let agent = Keys::generate();
    let mut tags = base("delete");
    tags.push(auth_for(&agent));
    let event = agent.sign_new(KIND_REVISION, tags, "");
    parse(&event).unwrap();
    let auth = nipoa::auth_tag(&event).unwrap().unwrap();
    assert!(nipoa::verify(&agent.pubkey(), &auth));
}

#[test]
fn op_round_trips() {
    for op in [Op::Create, Op::Update, Op::Move, Op::Delete, Op::Restore] {
        assert_eq!(Op::parse(op.as_str()), Some(op));
    }
    assert_eq!(Op::parse("CREATE"), None);
}

#[test]
fn long_version_is_cut_in_the_error() {
    let v = "9".repeat(100);
    let event = Keys::generate().sign_new(KIND_REVISION, set(base("create"), "ar", Some(&["ar", &v])), "");
    let e = parse(&event).unwrap_err();
    assert_eq!(e, format!("unsupported envelope version ar={}...", "9".repeat(32)));
}
