//! `buzz operator nip-fi ...` against a real cluster: the request file and UUID are written before
//! sending, `retry` recovers the same operation, and the exit code follows the receipt state.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

use buzz_tests::nip_fi::{self, bind, ISSUER};
use buzz_tests::{Cluster, ClusterOptions};

async fn buzz(cluster: &Cluster, args: Vec<String>) -> (i32, serde_json::Value) {
    let url = format!("http://{}", cluster.policy);
    let key = cluster.operator.secret_hex();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_buzz"))
            .args(["operator", "nip-fi"])
            .args(&args)
            .args(["--url", &url, "--secret-key", &key])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap(), value)
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

#[tokio::test]
async fn exit_codes_follow_receipt_states_and_a_written_request_recovers() {
    let cluster = Cluster::start_with(ClusterOptions {
        gateways: 1,
        writers: 1,
        queriers: 1,
        nip_fi: Some(nip_fi::open_gate),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("fi-cli.test").await;
    bind(&cluster, &team).await;
    let (id, owner) = (team.id.to_string(), team.owner.public_hex());
    let dir = std::env::temp_dir().join(format!("buzz-nip-fi-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |n: &str| -> PathBuf { dir.join(n) };

    let (code, cur) =
        buzz(&cluster, s(&["status", "--community-id", &id, "--expected-host", &team.host])).await;
    assert_eq!((code, cur["expected_policy_generation"].as_i64()), (0, Some(0)), "{cur}");

    let pre = |gen: &str, req: &str, f: &PathBuf| {
        s(&[
            "--community-id",
            &id,
            "--expected-host",
            &team.host,
            "--actor-pubkey",
            &owner,
            "--expected-owner-pubkey",
            &owner,
            "--expected-policy-generation",
            gen,
            "--expected-requires-nip-fi",
            req,
            "--request-file",
            f.to_str().unwrap(),
        ])
    };
    let mut enable = s(&["enable", "--expected-issuer", ISSUER]);
    enable.extend(pre("0", "false", &file("enable.json")));
    let (code, r) = buzz(&cluster, enable.clone()).await;
    assert_eq!((code, r["receipt"]["state"].as_str()), (10, Some("pending")), "{r}");
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(file("enable.json")).unwrap()).unwrap();
    assert_eq!(saved["operation_id"], r["receipt"]["operation_id"], "the request file holds the operation");
    // The same file is never overwritten; retry re-sends it (replay, same receipt).
    assert_eq!(buzz(&cluster, enable).await.0, 1);
    let retry = s(&["retry", "--request-file", file("enable.json").to_str().unwrap()]);
    let (code, again) = buzz(&cluster, retry).await;
    assert_eq!((code, &again["receipt"]), (10, &r["receipt"]));

    let mut disable = s(&["disable"]);
    disable.extend(pre("1", "true", &file("disable.json")));
    let (code, d) = buzz(&cluster, disable).await;
    assert_eq!((code, d["receipt"]["state"].as_str()), (0, Some("applied")), "{d}");
    let op = saved["operation_id"].as_str().unwrap().to_owned();
    assert_eq!(buzz(&cluster, s(&["receipt", "--operation-id", &op])).await.0, 11);
    // A stale precondition is a 409: a response error.
    let mut stale = s(&["disable"]);
    stale.extend(pre("0", "false", &file("stale.json")));
    assert_eq!(buzz(&cluster, stale).await.0, 5);
    // Deleted target: unavailable.
    sqlx::query("DELETE FROM communities WHERE id = $1").bind(team.id).execute(&cluster.pool).await.unwrap();
    let dop = d["receipt"]["operation_id"].as_str().unwrap().to_owned();
    assert_eq!(buzz(&cluster, s(&["receipt", "--operation-id", &dop])).await.0, 12);
    // Transport error.
    let out = Command::new(env!("CARGO_BIN_EXE_buzz"))
        .args(["operator", "nip-fi", "receipt", "--operation-id", &dop, "--url", "http://127.0.0.1:9"])
        .args(["--secret-key", &cluster.operator.secret_hex()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    std::fs::remove_dir_all(&dir).ok();
    cluster.stop().await;
}
