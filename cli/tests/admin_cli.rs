//! `buzz admin <method> ...` against a real cluster: a NIP-86 call signed from a key file or
//! `--secret-key`, its `{"result", "error"}` answer printed, the exit code following the status.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use buzz_tests::Cluster;
use serde_json::json;

async fn buzz(args: Vec<String>) -> (i32, serde_json::Value) {
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_buzz")).arg("admin").args(&args).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    (out.status.code().unwrap(), serde_json::from_str(stdout.trim()).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buzz_admin_calls_nip86_signed_from_a_key_file_or_a_secret_key() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let member = cluster.member(&team).await;
    let bob = buzz_core::Keys::generate();
    let file = std::env::temp_dir().join(format!("buzz-admin-{}.key", uuid::Uuid::new_v4()));
    std::fs::write(&file, format!("{}\n", team.owner.secret_hex())).unwrap();
    let url = format!("http://{}", cluster.gateways[1]);
    let with = |method: &str, params: &[&str], key: &[&str]| {
        let mut v: Vec<String> = vec![method.to_owned()];
        v.extend(params.iter().map(|p| (*p).to_owned()));
        v.extend(["--url", &url, "--host", &team.host].iter().map(|s| (*s).to_owned()));
        v.extend(key.iter().map(|s| (*s).to_owned()));
        v
    };
    let key_file = ["--key-file", file.to_str().unwrap()];

    let (code, v) = buzz(with("banpubkey", &[&bob.public_hex(), "spam"], &key_file)).await;
    assert_eq!((code, &v["result"]), (0, &json!(true)), "{v}");
    let (code, v) = buzz(with("listbannedpubkeys", &[], &key_file)).await;
    assert_eq!(code, 0);
    assert_eq!(v["result"], json!([{"pubkey": bob.public_hex(), "reason": "spam"}]));
    let (code, v) = buzz(with("allowkind", &["9"], &key_file)).await;
    assert_eq!((code, &v["result"]), (0, &json!(true)), "{v}");
    let (_, v) = buzz(with("listallowedkinds", &[], &key_file)).await;
    assert_eq!(v["result"], json!([9]));
    // A member's key: refused, printed, exit 5.
    let (code, v) = buzz(with("supportedmethods", &[], &["--secret-key", &member.secret_hex()])).await;
    assert_eq!(code, 5);
    assert_eq!(v["error"], "only the community's owner and admins manage it");
    let (code, _) = buzz(with("supportedmethods", &[], &[])).await;
    assert_eq!(code, 1, "no key is a usage error");
    std::fs::remove_file(&file).ok();
    cluster.stop().await;
}
