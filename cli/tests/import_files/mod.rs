//! Export files for the hostile-import tests: `buzz operator export`/`import` through the real
//! CLI, a file's lines as JSON to edit, and a raw `POST /operator/communities/import` for what the
//! CLI would never send (a replayed header, a body that is not the signed one).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use buzz_core::{Event, Keys};
use buzz_tests::client::{message, WsClient};
use buzz_tests::snapshot::{channel, create, ok, rev, tag, TASK};
use buzz_tests::{Cluster, Community};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

/// Runs `buzz operator <args>` against `cluster` (off the runtime's threads): exit code, stdout
/// and stderr.
pub async fn buzz(cluster: &Cluster, args: Vec<String>) -> (i32, String, String) {
    buzz_at(&format!("http://{}", cluster.policy), cluster, args).await
}

/// [`buzz`] against the operator API at `url`, signed by `cluster`'s operator key.
pub async fn buzz_at(url: &str, cluster: &Cluster, args: Vec<String>) -> (i32, String, String) {
    let url = url.to_owned();
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

/// A fresh temporary file name.
pub fn temp_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("buzz-{name}-{}.ndjson", uuid::Uuid::new_v4()))
}

/// `team` exported from `cluster` with `buzz operator export`, as lines.
pub async fn export(cluster: &Cluster, team: &Community) -> Vec<Value> {
    let file = temp_file("export");
    let args =
        ["export", "--quiet", "--community-id", &team.id.to_string(), "--out", &file.display().to_string()]
            .map(str::to_owned)
            .to_vec();
    let (code, _, err) = buzz(cluster, args).await;
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_file(&file).ok();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// `lines` written to a temporary file.
pub fn write(lines: &[Value]) -> PathBuf {
    let file = temp_file("edited");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    file
}

/// `lines` under a new community id (header and community line): a community of its own.
pub fn renamed(lines: &[Value]) -> (Vec<Value>, uuid::Uuid) {
    let id = uuid::Uuid::new_v4();
    let mut out = lines.to_vec();
    out[0]["community_id"] = id.to_string().into();
    out[1]["row"]["id"] = id.to_string().into();
    (out, id)
}

/// `buzz operator import FILE --host HOST`: exit code, the JSON answer (or `Null`) and stderr.
pub async fn import(cluster: &Cluster, file: &Path, host: &str) -> (i32, Value, String) {
    let args = ["import", &file.display().to_string(), "--host", host].map(str::to_owned).to_vec();
    let (code, out, err) = buzz(cluster, args).await;
    (code, serde_json::from_str(out.trim()).unwrap_or(Value::Null), err)
}

/// [`import`] of `lines` (written to a temporary file, removed after).
pub async fn import_lines(cluster: &Cluster, lines: &[Value], host: &str) -> (i32, Value, String) {
    let file = write(lines);
    let out = import(cluster, &file, host).await;
    std::fs::remove_file(file).ok();
    out
}

/// The operator URL of an import into `host`.
pub fn import_url(cluster: &Cluster, host: &str) -> String {
    format!("http://{}/operator/communities/import?host={host}", cluster.policy)
}

/// `POST` of `body` to `url` with the `authorization` header `auth`: status and JSON body.
pub async fn post(url: &str, auth: &str, body: Vec<u8>) -> (u16, Value) {
    let res = reqwest::Client::new().post(url).header("authorization", auth).body(body).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Rows of `cluster`'s community `id` counted in `table`.
pub async fn rows(cluster: &Cluster, table: &str, id: uuid::Uuid) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE community_id = $1"))
        .bind(id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap()
}

/// `lines` with `event` added after the last event line (the next seq, in `channel`), the
/// header's and end line's counts raised to match.
pub fn with_event(lines: &[Value], event: &buzz_core::Event, channel: Option<uuid::Uuid>) -> Vec<Value> {
    let mut out = lines.to_vec();
    let last = out.iter().rposition(|l| l["type"] == "event").unwrap();
    let row = serde_json::json!({
        "id": event.id, "seq": out[last]["row"]["seq"].as_i64().unwrap() + 1, "pubkey": event.pubkey,
        "kind": event.kind, "created_at": event.created_at, "channel_id": channel, "raw": event.to_json(),
        "accepted_at": "2026-12-01T00:00:00+00:00", "expires_at": null, "deleted_at": null,
        "redacted_at": null, "thread_root": null,
    });
    out.insert(last + 1, serde_json::json!({"type": "event", "row": row}));
    for i in [0, out.len() - 1] {
        let n = out[i]["counts"]["event"].as_u64().unwrap();
        out[i]["counts"]["event"] = (n + 1).into();
    }
    out
}

/// What [`small_world`] wrote: the reader whose marker and mention are there, the channel, and
/// the events whose seq the links name.
pub struct Small {
    pub bob: Keys,
    pub general: Uuid,
    pub marked: Event,
    pub created: Event,
}

/// A channel with a thread of messages, a mention of bob, bob's read marker, an artifact created
/// and updated, and an audited NIP-86 change.
pub async fn small_world(cluster: &Cluster, team: &Community) -> Small {
    let (alice, bob) = (cluster.member(team).await, cluster.member(team).await);
    let mut o = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    let mut a = WsClient::authed(cluster.gateways[1], &team.host, &alice).await;
    let general = channel(&mut o, &team.owner, "open", &[]).await;
    ok(&mut a, &message(&alice, general, "one")).await;
    let marked = alice.sign_new(9, vec![tag("h", general), tag("p", bob.public_hex())], "two, bob");
    ok(&mut a, &marked).await;
    ok(&mut a, &message(&alice, general, "three")).await;
    let path = format!("/api/channels/{general}/read");
    let body = json!({"up_to": marked.id});
    let res = cluster.tenant_request(1, team, Method::POST, &path, Some(&body), &bob).await;
    assert!(res.status().is_success(), "mark read: {}", res.status());
    let (d, created) = create(&mut a, &alice, general, TASK, &[]).await;
    ok(&mut a, &rev(&alice, "update", d, general, Some(&created), TASK, &[tag("p", bob.public_hex())])).await;
    ok(&mut a, &message(&alice, general, "four")).await;
    buzz_tests::nip86::ok(cluster, 0, team, &team.owner, "disallowkind", &json!([7])).await;
    Small { bob, general, marked, created }
}
