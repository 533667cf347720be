//! Hostile community imports (issue 37): what a crafted export file could do to the relay and to
//! every other community, end to end with the real `buzz` CLI and cluster.
//!
//! Run: `cargo nextest run -p buzz-cli --test import_hostile` (PostgreSQL, Redis and NATS).

#![allow(clippy::unwrap_used)]

mod import_files;

use buzz_core::{Event, Keys};
use buzz_tests::client::{message, WsClient};
use buzz_tests::snapshot::{channel, ok, tag};
use buzz_tests::{nip86, Cluster, ClusterOptions, Community};
use import_files::{export, import_lines, renamed, small_world, with_event};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

fn options() -> ClusterOptions {
    ClusterOptions { writers: 1, queriers: 1, snapshots: 1, ..ClusterOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seqs_at_the_maximum_in_an_import_take_fresh_numbers_and_every_community_keeps_writing() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    small_world(&cluster, &team).await;
    let other = cluster.community("other.test").await;
    let (mut lines, id) = renamed(&export(&cluster, &team).await);
    for kind in ["event", "audit"] {
        let last = lines.iter_mut().rev().find(|l| l["type"] == kind).unwrap();
        last["row"]["seq"] = i64::MAX.into();
    }
    let (code, answer, err) = import_lines(&cluster, &lines, "copy.test").await;
    assert_eq!((code, &answer["imported"]), (0, &json!(true)), "{answer} {err}");

    // Every other community goes on writing: a channel, a message, a NIP-86 change.
    let mut ws = WsClient::authed(cluster.gateways[1], &other.host, &other.owner).await;
    let ch = channel(&mut ws, &other.owner, "open", &[]).await;
    ok(&mut ws, &message(&other.owner, ch, "still writing")).await;
    nip86::ok(&cluster, 0, &other, &other.owner, "disallowkind", &json!([7])).await;
    // The imported rows took the target's own numbers, and so does what follows them.
    let copy =
        Community { id: buzz_core::CommunityId(id), host: "copy.test".into(), owner: team.owner.clone() };
    let general: Uuid = lines.iter().find(|l| l["type"] == "channel").unwrap()["row"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut c = WsClient::authed(cluster.gateways[0], &copy.host, &copy.owner).await;
    let after = message(&copy.owner, general, "after the import");
    ok(&mut c, &after).await;
    nip86::ok(&cluster, 1, &copy, &copy.owner, "disallowkind", &json!([1])).await;
    for table in ["events", "community_audit"] {
        let sql = format!("SELECT max(seq) FROM {table}");
        let max: i64 = sqlx::query_scalar(&sql).fetch_one(&cluster.pool).await.unwrap();
        assert!(max < 1_000, "{table}: {max}");
    }
    let later: bool = sqlx::query_scalar(
        "SELECT seq > ALL (SELECT seq FROM events WHERE community_id = $1 AND id <> $2) FROM events \
         WHERE community_id = $1 AND id = $2",
    )
    .bind(id)
    .bind(after.id.to_string())
    .fetch_one(&cluster.pool)
    .await
    .unwrap();
    assert!(later, "a new message is accepted after every imported one");
    cluster.stop().await;
}

/// Every seq of community `id` (events, revision records, read markers, mentions; and apart, the
/// audit log), labelled by what it belongs to, as its rank among the community's distinct
/// values: the order and the ties, without the numbers.
async fn seq_ranks(cluster: &Cluster, id: Uuid) -> Vec<(String, i64)> {
    sqlx::query_as(
        "SELECT label, dense_rank() OVER (PARTITION BY space ORDER BY seq) FROM ( \
           SELECT 'e' AS space, CASE WHEN pubkey = $2 THEN 'relay ' || kind || ' ' || channel_id \
                  ELSE 'event ' || id END AS label, seq FROM events WHERE community_id = $1 \
           UNION ALL SELECT 'e', 'revision ' || revision_id, accepted_seq FROM artifact_revisions \
                  WHERE community_id = $1 \
           UNION ALL SELECT 'e', 'marker ' || channel_id || ' ' || pubkey, seq FROM read_markers \
                  WHERE community_id = $1 \
           UNION ALL SELECT 'e', 'mention ' || pubkey || ' ' || event_id, seq FROM mentions \
                  WHERE community_id = $1 \
           UNION ALL SELECT 'a', 'audit ' || method || ' ' || params::text, seq FROM community_audit \
                  WHERE community_id = $1) x ORDER BY label",
    )
    .bind(id)
    .bind(cluster.relay.public_hex())
    .fetch_all(&cluster.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_seqs_are_fresh_and_keep_the_order_of_every_link_even_to_events_that_are_gone() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    let small = small_world(&cluster, &team).await;
    // Gone as retention removes events: the marker's message and the artifact's first revision,
    // whose read marker, mention and revision record stay and name their seq.
    sqlx::query("DELETE FROM events WHERE community_id = $1 AND id = ANY($2)")
        .bind(team.id)
        .bind(vec![small.marked.id.to_string(), small.created.id.to_string()])
        .execute(&cluster.pool)
        .await
        .unwrap();
    let source_max: i64 =
        sqlx::query_scalar("SELECT max(seq) FROM events").fetch_one(&cluster.pool).await.unwrap();
    let (lines, id) = renamed(&export(&cluster, &team).await);
    let (code, answer, err) = import_lines(&cluster, &lines, "copy.test").await;
    assert_eq!((code, &answer["imported"]), (0, &json!(true)), "{answer} {err}");

    let (want, got) = (seq_ranks(&cluster, team.id.0).await, seq_ranks(&cluster, id).await);
    assert!(want.len() >= 12 && want.iter().any(|(l, _)| l.starts_with("marker")), "{want:?}");
    assert_eq!(want, got);
    let min: i64 = sqlx::query_scalar(
        "SELECT least((SELECT min(seq) FROM events WHERE community_id = $1), \
                      (SELECT min(accepted_seq) FROM artifact_revisions WHERE community_id = $1))",
    )
    .bind(id)
    .fetch_one(&cluster.pool)
    .await
    .unwrap();
    assert!(min > source_max, "numbers from this deployment's sequence: {min} <= {source_max}");
    // The unread count and the mentions read the same from the links.
    let copy =
        Community { id: buzz_core::CommunityId(id), host: "copy.test".into(), owner: team.owner.clone() };
    for path in [format!("/api/channels/{}/summary", small.general), "/api/mentions?limit=100".to_owned()] {
        let read = |c: &Community| {
            let path = path.clone();
            let (cluster, bob) = (&cluster, &small.bob);
            let c = c.clone();
            async move {
                let res = cluster.tenant_request(0, &c, Method::GET, &path, None, bob).await;
                assert!(res.status().is_success(), "{path}: {}", res.status());
                res.json::<Value>().await.unwrap()
            }
        };
        assert_eq!(read(&team).await, read(&copy).await, "{path}");
    }
    cluster.stop().await;
}

/// A key's event of `kind` with `tags`, a minute old.
fn signed(keys: &Keys, kind: u32, tags: Vec<Vec<String>>, content: &str) -> Event {
    let created_at = buzz_core::unix_now() - 60;
    keys.sign(buzz_core::UnsignedEvent {
        pubkey: String::new(),
        created_at,
        kind,
        tags,
        content: content.into(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_whose_header_names_a_key_never_makes_this_relay_sign_what_that_key_signed() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    let small = small_world(&cluster, &team).await;
    let lines = export(&cluster, &team).await;
    let attacker = Keys::generate();
    let g = small.general;
    let derives = "this relay does not derive";
    let forged = [
        (
            signed(&attacker, 9, vec![tag("h", g)], "relay notice: sign in again at https://evil.example"),
            derives,
        ),
        (signed(&attacker, 22242, vec![tag("relay", "wss://team.test"), tag("challenge", "c")], ""), derives),
        (signed(&attacker, 27235, vec![tag("u", "https://team.test/"), tag("method", "POST")], ""), derives),
        // A second member list of the channel, naming the attacker.
        (
            signed(
                &attacker,
                39002,
                vec![tag("d", g), vec!["p".into(), attacker.public_hex(), "owner".into()]],
                "",
            ),
            "appears twice",
        ),
        // A removal no imported move records.
        (
            signed(
                &attacker,
                45011,
                vec![tag("d", Uuid::new_v4()), tag("h", g), tag("e", "ab".repeat(32))],
                "",
            ),
            "revision records do not show",
        ),
        // A kind this relay never stores from anyone.
        (signed(&small.bob, 1, vec![tag("h", g)], "a kind-1 note"), "never accepted from a client"),
    ];
    for (event, why) in &forged {
        let (mut file, id) = renamed(&with_event(&lines, event, Some(g)));
        file[0]["relay_pubkey"] = attacker.public_hex().into();
        let (code, answer, err) = import_lines(&cluster, &file, "forged.test").await;
        assert!(
            code == 5 && err.contains("400") && err.contains("invalid_export") && err.contains(why),
            "kind {}: {code} {answer} {err}",
            event.kind
        );
        assert_eq!(
            import_files::rows(&cluster, "events", id).await,
            0,
            "kind {}: nothing imported",
            event.kind
        );
        let (status, _) = cluster
            .operator_json(Method::GET, &format!("/operator/communities?community_id={id}"), None)
            .await;
        assert_eq!(status, 404);
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_state_in_an_import_is_derived_from_the_imported_tables_whatever_the_file_says() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    let small = small_world(&cluster, &team).await;
    let lines = export(&cluster, &team).await;
    let attacker = Keys::generate();
    let relay = cluster.relay.public_hex();
    // The file's relay events, forged by the key its header names: the attacker listed in the
    // member list, the channel renamed.
    let (mut file, id) = renamed(&lines);
    file[0]["relay_pubkey"] = attacker.public_hex().into();
    for line in file.iter_mut().filter(|l| l["type"] == "event" && l["row"]["pubkey"] == relay.as_str()) {
        let mut event: Event = serde_json::from_str(line["row"]["raw"].as_str().unwrap()).unwrap();
        match event.kind {
            39002 => event.tags.push(vec!["p".into(), attacker.public_hex(), "owner".into()]),
            39000 => event.tags[1][1] = "sign in again at https://evil.example".into(),
            _ => {}
        }
        let forged = attacker.sign(buzz_core::UnsignedEvent {
            pubkey: String::new(),
            created_at: event.created_at,
            kind: event.kind,
            tags: event.tags,
            content: event.content,
        });
        line["row"]["id"] = forged.id.to_string().into();
        line["row"]["pubkey"] = forged.pubkey.to_string().into();
        line["row"]["raw"] = forged.to_json().into();
    }
    let (code, answer, err) = import_lines(&cluster, &file, "derived.test").await;
    assert_eq!(
        (code, &answer["imported"], &answer["resigned"]),
        (0, &json!(true), &json!(2)),
        "{answer} {err}"
    );
    let copy =
        Community { id: buzz_core::CommunityId(id), host: "derived.test".into(), owner: team.owner.clone() };
    let filter = json!({"kinds": [39000, 39002], "#d": [small.general.to_string()]});
    let mut o = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    let mut c = WsClient::authed(cluster.gateways[1], &copy.host, &copy.owner).await;
    let (want, got) =
        (o.req("s", std::slice::from_ref(&filter)).await.events, c.req("c", &[filter]).await.events);
    assert_eq!(got.len(), 2, "{got:?}");
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g.pubkey, cluster.relay.pubkey(), "served as this relay's");
        assert!(g.verify().is_ok());
        assert_eq!(
            (g.kind, &g.tags, g.created_at),
            (w.kind, &w.tags, w.created_at),
            "derived from the tables"
        );
    }
    let by_attacker: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE pubkey = $1 OR raw LIKE $2")
        .bind(attacker.public_hex())
        .bind(format!("%{}%", attacker.public_hex()))
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(by_attacker, 0, "nothing of what the attacker signed is stored");
    // A rerun derives the same events from the stored tables: recognised, nothing written.
    let (code, again, err) = import_lines(&cluster, &file, "derived.test").await;
    assert_eq!((code, &again["imported"]), (0, &json!(false)), "{again} {err}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_no_section_has_in_a_row_or_a_line_is_refused_and_nothing_is_imported() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    small_world(&cluster, &team).await;
    let lines = export(&cluster, &team).await;
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 4] = [
        ("member", |l| l["row"]["pad"] = "x".repeat(1000).into()),
        ("event", |l| l["row"]["extra"] = json!({"a": [1, 2, 3]})),
        ("community", |l| l["row"]["pad"] = "x".into()),
        ("channel", |l| l["pad"] = "x".into()),
    ];
    for (kind, edit) in edits {
        let (mut file, id) = renamed(&lines);
        edit(file.iter_mut().find(|l| l["type"] == kind).unwrap());
        let (code, answer, err) = import_lines(&cluster, &file, "padded.test").await;
        assert!(code == 5 && err.contains("400") && err.contains("invalid_export"), "{kind}: {answer} {err}");
        assert!(err.contains("unknown column") || err.contains("every line must be"), "{kind}: {err}");
        assert_eq!(import_files::rows(&cluster, "events", id).await, 0, "{kind}");
        assert_eq!(import_files::rows(&cluster, "community_members", id).await, 0, "{kind}");
    }
    cluster.stop().await;
}

/// A file that makes a key both banned and a member (or the owner) is refused and imports
/// nothing: the relay never holds such a key, and tokens, member changes and read markers trust
/// that it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_that_makes_a_key_both_banned_and_a_member_is_refused() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    small_world(&cluster, &team).await;
    let member = cluster.member(&team).await;
    let stranger = Keys::generate();
    nip86::ok(&cluster, 0, &team, &team.owner, "banpubkey", &json!([stranger.public_hex(), "spam"])).await;
    let exported = export(&cluster, &team).await;
    for key in [member.public_hex(), team.owner.public_hex()] {
        let (mut lines, id) = renamed(&exported);
        let ban = lines.iter_mut().find(|l| l["type"] == "ban").unwrap();
        ban["row"]["pubkey"] = key.clone().into();
        let (code, answer, err) = import_lines(&cluster, &lines, "copy.test").await;
        assert_ne!(code, 0, "{answer}");
        assert!(err.contains("both banned and a member"), "{err}");
        assert_eq!(import_files::rows(&cluster, "community_members", id).await, 0);
    }
    // The honest file imports.
    let (lines, _) = renamed(&exported);
    let (code, answer, err) = import_lines(&cluster, &lines, "copy.test").await;
    assert_eq!((code, &answer["imported"]), (0, &json!(true)), "{answer} {err}");
    cluster.stop().await;
}
