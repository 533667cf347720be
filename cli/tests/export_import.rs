//! Community export and import end to end: `buzz operator export` from one deployment and
//! `buzz operator import` into another (its own database and relay key) answer every read the
//! same; a rerun is recognised; conflicts, tampering, truncation and bad auth are refused and
//! leave nothing behind.
//!
//! Run: `cargo nextest run -p buzz-cli --test export_import` (PostgreSQL, Redis and NATS as for
//! every end-to-end test).

#![allow(clippy::unwrap_used)]

mod transfer_world;

use std::path::{Path, PathBuf};
use std::process::Command;

use buzz_tests::{Cluster, ClusterOptions, Community};
use serde_json::{json, Value};

fn options() -> ClusterOptions {
    ClusterOptions { writers: 1, queriers: 1, snapshots: 1, ..ClusterOptions::default() }
}

/// Runs `buzz operator <args>` against `cluster`'s operator API: exit code, stdout, stderr.
async fn buzz(cluster: &Cluster, args: Vec<String>) -> (i32, String, String) {
    let url = format!("http://{}", cluster.policy);
    let key = cluster.operator.secret_hex();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_buzz"))
            .arg("operator")
            .args(&args)
            .args(["--url", &url, "--secret-key", &key])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap(), text(&out.stdout), text(&out.stderr))
}

fn temp_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("buzz-{name}-{}.ndjson", uuid::Uuid::new_v4()))
}

async fn export(cluster: &Cluster, team: &Community) -> PathBuf {
    let file = temp_file("export");
    let args = vec![
        "export".into(),
        "--community-id".into(),
        team.id.to_string(),
        "--out".into(),
        file.display().to_string(),
    ];
    let (code, _, err) = buzz(cluster, args).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("exported") && err.contains("rows (100%)"), "progress: {err}");
    file
}

async fn import(cluster: &Cluster, file: &Path, host: Option<&str>) -> (i32, Value, String) {
    let mut args = vec!["import".to_owned(), file.display().to_string()];
    if let Some(h) = host {
        args.extend(["--host".to_owned(), h.to_owned()]);
    }
    let (code, out, err) = buzz(cluster, args).await;
    (code, serde_json::from_str(out.trim()).unwrap_or(Value::Null), err)
}

fn lines(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The lines of a fresh export of `team` from `cluster` (the file removed).
async fn exported_lines(cluster: &Cluster, team: &Community) -> Vec<Value> {
    let file = export(cluster, team).await;
    let out = lines(&file);
    std::fs::remove_file(file).ok();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_community_answers_every_read_as_the_original_and_a_rerun_changes_nothing() {
    let source = Cluster::start_with(options()).await;
    let team = source.community("team.test").await;
    let world = transfer_world::build(&source, &team).await;
    let before = transfer_world::reads(&source, &team, &world).await;
    // The reads are not vacuous: events, summaries, mentions and snapshot entries are there.
    let filled =
        |prefix: &str| before.iter().filter(|(l, v)| l.contains(prefix) && v.to_string().len() > 200).count();
    assert!(
        filled("REQ") > 40 && filled("/summary") >= 6 && filled("mentions") >= 2 && filled("snapshot") >= 4
    );
    // Searches find things (a reader of the general channel), and the NIP-86 state is there.
    let found = |label: &str, req: bool| {
        let kind = if req { "REQ {" } else { "NIP-86" };
        before.iter().filter(|(l, v)| l.contains(&format!("{kind}{label}")) && v != &json!([])).count()
    };
    assert!(found("\"search\":\"payment timeout\"}", true) >= 3 && found("\"search\":\"reply\"}", true) >= 3);
    assert!(found("\"search\":\"\\\"first reply\\\"\"}", true) >= 3);
    assert!(found("\"search\":\"hi -bob\"}", true) >= 2);
    for list in ["listbannedpubkeys", "listbannedevents", "listdisallowedkinds", "listblockedips"] {
        assert_eq!(found(&format!(" {list}"), false), 1, "{list}");
    }
    let audit = before.iter().find(|(l, _)| l.ends_with("/audit")).unwrap();
    assert_eq!(audit.1[1]["entries"].as_array().map(Vec::len), Some(5), "{}", audit.1);
    let file = export(&source, &team).await;
    let rows = lines(&file);
    for kind in ["ban", "event_ban", "audit"] {
        assert!(rows.iter().any(|r| r["type"] == kind), "{kind} lines");
    }
    assert_eq!(rows[1]["row"]["disallowed_kinds"], json!([1, 7]), "{}", rows[1]);
    assert_eq!(rows[1]["row"]["blocked_ips"][0]["ip"], "2001:db8::1", "{}", rows[1]);
    assert_eq!(rows[0]["type"], "header");
    assert_eq!(rows[0]["relay_pubkey"], source.relay.public_hex());
    assert_eq!(rows.last().unwrap()["counts"], rows[0]["counts"]);
    let relay_signed =
        rows.iter().filter(|r| r["type"] == "event" && r["row"]["pubkey"] == rows[0]["relay_pubkey"]).count();
    assert!(relay_signed >= 9, "39000/39002 per channel and the move's 45011: {relay_signed}");
    let seqs: Vec<i64> =
        rows.iter().filter(|r| r["type"] == "event").map(|r| r["row"]["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "events in acceptance order");

    // Another deployment: its own database and relay key.
    let target = Cluster::start_with(options()).await;
    let (code, answer, err) = import(&target, &file, None).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(answer["imported"], true, "{answer}");
    assert_eq!(answer["resigned"], relay_signed, "{answer}");
    assert_eq!(answer["counts"], rows[0]["counts"]);
    let after = transfer_world::reads(&target, &team, &world).await;
    assert_eq!(before.len(), after.len());
    for ((label, want), (_, got)) in before.iter().zip(&after) {
        assert_eq!(want, got, "{label}");
    }
    // The re-signed events carry the target's key, so its write path replaces them as its own.
    let foreign: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE pubkey = $1")
        .bind(source.relay.public_hex())
        .fetch_one(&target.pool)
        .await
        .unwrap();
    assert_eq!(foreign, 0);
    // No number of the file is kept: the imported rows took the target's own (issue 37), one per
    // distinct value of the seq columns, at most one per such row.
    let numbered = rows
        .iter()
        .filter(|r| ["event", "revision", "read_marker", "mention"].contains(&r["type"].as_str().unwrap()))
        .count();
    let max: i64 = sqlx::query_scalar("SELECT max(seq) FROM events").fetch_one(&target.pool).await.unwrap();
    assert!(max <= i64::try_from(numbered).unwrap(), "{max} > {numbered}");

    let imported = exported_lines(&target, &team).await;
    assert_eq!(imported.len(), rows.len());
    // A rerun is recognised and changes nothing; the same id under another host is a conflict.
    let (code, again, _) = import(&target, &file, None).await;
    assert_eq!((code, &again["imported"]), (0, &json!(false)), "{again}");
    let (code, _, err) = import(&target, &file, Some("elsewhere.test")).await;
    assert_eq!(code, 5);
    assert!(err.contains("409") && err.contains("community_conflict"), "{err}");
    // Back into the source (same relay key): already there.
    let (code, back, err) = import(&source, &file, None).await;
    assert_eq!((code, &back["imported"], &back["resigned"]), (0, &json!(false), &json!(0)), "{back} {err}");
    // The target's own export is unchanged by the reruns, row for row.
    let again = exported_lines(&target, &team).await;
    assert_eq!(again[1..], imported[1..]);
    // NIP-86 changes go on in the target after the imported audit history (seq raised past it).
    let owner = &team.owner;
    buzz_tests::nip86::ok(&target, 0, &team, owner, "unblockip", &json!(["2001:db8::1"])).await;
    let path = format!("/operator/communities/{}/audit", team.id);
    let (_, audit) = target.operator_json(reqwest::Method::GET, &path, None).await;
    let seqs: Vec<i64> =
        audit["entries"].as_array().unwrap().iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs.len(), 6, "{audit}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{audit}");
    // Writes go on after the imported history: a new message is accepted after every import.
    let general = world.channels[0];
    let mut ws = buzz_tests::WsClient::authed(target.gateways[0], &team.host, owner).await;
    let after = buzz_tests::client::message(owner, general, "after the import");
    buzz_tests::snapshot::ok(&mut ws, &after).await;
    let later: bool = sqlx::query_scalar(
        "SELECT seq > ALL (SELECT seq FROM events WHERE community_id = $1 AND id <> $2) FROM events \
         WHERE community_id = $1 AND id = $2",
    )
    .bind(team.id)
    .bind(after.id.to_string())
    .fetch_one(&target.pool)
    .await
    .unwrap();
    assert!(later, "the new message is accepted after every imported event");
    std::fs::remove_file(&file).ok();
    target.stop().await;
    source.stop().await;
}

/// `file` with its community id replaced by a new one (header and community line).
fn renamed(file: &Path, team: &Community, edit: impl Fn(&mut Vec<String>)) -> (PathBuf, uuid::Uuid) {
    let id = uuid::Uuid::new_v4();
    let text = std::fs::read_to_string(file).unwrap().replace(&team.id.to_string(), &id.to_string());
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    edit(&mut lines);
    let out = temp_file("edited");
    std::fs::write(&out, lines.join("\n") + "\n").unwrap();
    (out, id)
}

async fn community_status(cluster: &Cluster, id: uuid::Uuid) -> u16 {
    cluster
        .operator_json(reqwest::Method::GET, &format!("/operator/communities?community_id={id}"), None)
        .await
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_are_refused_clearly_on_conflicts_tampering_truncation_and_bad_auth() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    let mut ws = buzz_tests::WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    let general = buzz_tests::snapshot::channel(&mut ws, &team.owner, "open", &[]).await;
    let hello = buzz_tests::client::message(&team.owner, general, "hello");
    buzz_tests::snapshot::ok(&mut ws, &hello).await;
    let file = export(&cluster, &team).await;

    // Another id on the same host: the host is taken.
    let (copy, id) = renamed(&file, &team, |_| {});
    let (code, _, err) = import(&cluster, &copy, None).await;
    assert!(code == 5 && err.contains("409") && err.contains("host_conflict"), "{err}");
    // A tampered event (its content no longer matches its id and signature).
    let (bad, bad_id) = renamed(&file, &team, |l| {
        for line in l.iter_mut().filter(|x| x.contains("hello")) {
            *line = line.replace("hello", "HELLO");
        }
    });
    let (code, _, err) = import(&cluster, &bad, Some("copy.test")).await;
    assert!(code == 5 && err.contains("400") && err.contains("invalid_export"), "{err}");
    // Cut short: the end line is missing.
    let (short, short_id) = renamed(&file, &team, |l| {
        l.pop();
    });
    let (code, _, err) = import(&cluster, &short, Some("copy.test")).await;
    assert!(code == 5 && err.contains("without its end line"), "{err}");
    for gone in [id, bad_id, short_id] {
        assert_eq!(community_status(&cluster, gone).await, 404, "nothing of a refused import is left");
    }

    // The body must be the one the operator signed (the payload tag), and only operators may.
    let url = format!("http://{}/operator/communities/import?host=copy.test", cluster.policy);
    let body = std::fs::read(&copy).unwrap();
    let auth = buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, b"other");
    let res = reqwest::Client::new()
        .post(&url)
        .header("authorization", auth)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let stranger = buzz_core::Keys::generate();
    let auth = buzz_core::nip98::authorization_header(&stranger, "POST", &url, &body);
    let res =
        reqwest::Client::new().post(&url).header("authorization", auth).body(body).send().await.unwrap();
    assert_eq!(res.status(), 403);
    let export_url = format!("/operator/communities/{}/export", uuid::Uuid::new_v4());
    assert_eq!(cluster.operator_json(reqwest::Method::GET, &export_url, None).await.0, 404);

    // A version-1 export from before NIP-86 (no such sections, counts or columns) still imports.
    let (old, old_id) = renamed(&file, &team, |l| {
        for line in l.iter_mut() {
            let mut v: Value = serde_json::from_str(line).unwrap();
            let strip = |v: &mut Value, field: &str, keys: [&str; 3]| {
                if let Some(map) = v.get_mut(field).and_then(Value::as_object_mut) {
                    keys.iter().for_each(|k| drop(map.remove(*k)));
                }
            };
            strip(&mut v, "counts", ["ban", "event_ban", "audit"]);
            strip(&mut v, "row", ["allowed_kinds", "disallowed_kinds", "blocked_ips"]);
            *line = v.to_string();
        }
    });
    assert!(!std::fs::read_to_string(&old).unwrap().contains("\"ban\""));
    let (code, answer, err) = import(&cluster, &old, Some("old.test")).await;
    assert_eq!((code, &answer["imported"], &answer["counts"]["ban"]), (0, &json!(true), &json!(0)), "{err}");
    assert_eq!(community_status(&cluster, old_id).await, 200);
    // Under another host the copy is a community of its own, with the same messages.
    let (code, answer, err) = import(&cluster, &copy, Some("copy.test")).await;
    assert_eq!((code, &answer["imported"], &answer["host"]), (0, &json!(true), &json!("copy.test")), "{err}");
    let twin =
        Community { id: buzz_core::CommunityId(id), host: "copy.test".into(), owner: team.owner.clone() };
    let mut c = buzz_tests::WsClient::authed(cluster.gateways[1], &twin.host, &team.owner).await;
    let got = c.req("r", &[json!({"kinds": [9]})]).await.events;
    assert_eq!(got, vec![hello]);
    for f in [file, copy, bad, short, old] {
        std::fs::remove_file(f).ok();
    }
    cluster.stop().await;
}
