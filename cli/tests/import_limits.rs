//! The import's limits: a body over `BUZZ_IMPORT_MAX_BYTES` (declared, or streamed without a
//! length) and a line over `BUZZ_IMPORT_MAX_LINE_BYTES` are refused with 413 JSON errors and
//! leave nothing behind; `buzz operator import` streams the file and says why.
//!
//! Run: `cargo nextest run -p buzz-cli --test import_limits` (PostgreSQL, Redis and NATS).

#![allow(clippy::unwrap_used)]

use std::process::Command;

use buzz_tests::{Cluster, ClusterOptions};
use serde_json::Value;

const MAX_BYTES: u64 = 64 * 1024;
const MAX_LINE: usize = 8 * 1024;

fn options() -> ClusterOptions {
    ClusterOptions {
        writers: 1,
        queriers: 1,
        snapshots: 1,
        policy_settings: Some(|s| {
            s.import_max_bytes = MAX_BYTES;
            s.import_max_line_bytes = MAX_LINE;
        }),
        ..ClusterOptions::default()
    }
}

/// `buzz operator <args>` against `cluster` (off the runtime's threads): exit code and stderr.
async fn buzz(cluster: &Cluster, args: &[&str]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_buzz"));
    cmd.arg("operator").args(args).args([
        "--url",
        &format!("http://{}", cluster.policy),
        "--secret-key",
        &cluster.operator.secret_hex(),
    ]);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
}

async fn communities(cluster: &Cluster) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM communities").fetch_one(&cluster.pool).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_over_the_size_or_line_limit_is_413_and_leaves_nothing() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    let mut ws = buzz_tests::WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    let general = buzz_tests::snapshot::channel(&mut ws, &team.owner, "open", &[]).await;
    buzz_tests::snapshot::ok(&mut ws, &buzz_tests::client::message(&team.owner, general, "hello")).await;
    let dir = std::env::temp_dir();
    let file = dir.join(format!("buzz-limits-{}.ndjson", uuid::Uuid::new_v4()));
    let id = team.id.to_string();
    let (code, err) =
        buzz(&cluster, &["export", "--community-id", &id, "--out", file.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{err}");
    // Under another id, so that only the limits can refuse it.
    let text = std::fs::read_to_string(&file).unwrap().replace(&id, &uuid::Uuid::new_v4().to_string());
    std::fs::write(&file, &text).unwrap();
    assert!(text.len() < 16 * 1024 && text.lines().all(|l| l.len() < MAX_LINE), "the export fits");
    let before = communities(&cluster).await;

    // One line over the limit (an unknown line type: the length is checked before the JSON).
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.insert(2, format!("{{\"type\":\"pad\",\"row\":\"{}\"}}", "x".repeat(MAX_LINE)));
    let long = dir.join(format!("buzz-long-{}.ndjson", uuid::Uuid::new_v4()));
    std::fs::write(&long, lines.join("\n") + "\n").unwrap();
    let (code, err) = buzz(&cluster, &["import", long.to_str().unwrap(), "--host", "long.test"]).await;
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("413") && err.contains("import_line_too_long") && err.contains("8192 bytes"),
        "{err}"
    );

    // Over the size limit, declared by the CLI's Content-Length.
    let big = dir.join(format!("buzz-big-{}.ndjson", uuid::Uuid::new_v4()));
    let pad: String =
        (0..20).map(|_| format!("{{\"type\":\"pad\",\"row\":\"{}\"}}\n", "y".repeat(4000))).collect();
    std::fs::write(&big, format!("{text}{pad}")).unwrap();
    let (code, err) = buzz(&cluster, &["import", big.to_str().unwrap(), "--host", "big.test"]).await;
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("413") && err.contains("import_too_large") && err.contains("65536 bytes"), "{err}");

    // The same body streamed without a length: cut off while it is spooled.
    let url = format!("http://{}/operator/communities/import?host=big.test", cluster.policy);
    let body = std::fs::read(&big).unwrap();
    let auth = buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, &body);
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body.chunks(8192).map(|c| Ok(c.to_vec())).collect();
    let res = reqwest::Client::new()
        .post(&url)
        .header("authorization", auth)
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["code"], "import_too_large", "{v}");
    assert_eq!(communities(&cluster).await, before, "nothing of a refused import is left");

    // Within the limits the CLI streams the file and the import succeeds.
    let (code, err) = buzz(&cluster, &["import", file.to_str().unwrap(), "--host", "copy.test"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(communities(&cluster).await, before + 1);
    for f in [file, long, big] {
        std::fs::remove_file(f).ok();
    }
    cluster.stop().await;
}
