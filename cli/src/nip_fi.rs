//! `buzz operator nip-fi ...`: the NIP-FI policy plane from the command line.
//!
//! `enable`/`disable` write the complete request (with its new operation UUID) to
//! `--request-file` before sending, so a lost response is recovered with `retry`, which re-sends
//! that same file with a fresh signature. Exit codes: 0 applied (or a current-state read),
//! 10 pending, 11 superseded, 12 unavailable, 5 request/transport/response error, 1 local error.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

const POLICY_PATH: &str = "/operator/communities/nip-fi-policy";

#[derive(Args)]
pub struct Conn {
    #[arg(long, env = "BUZZ_OPERATOR_URL", default_value = "http://127.0.0.1:7070")]
    url: String,
    #[arg(long, env = "BUZZ_OPERATOR_SECRET_KEY", hide_env_values = true)]
    secret_key: String,
}

#[derive(Args)]
pub struct Preconditions {
    #[arg(long)]
    community_id: uuid::Uuid,
    #[arg(long)]
    expected_host: String,
    /// The community owner the operator acts for (the relay requires actor == owner).
    #[arg(long)]
    actor_pubkey: String,
    #[arg(long)]
    expected_owner_pubkey: String,
    #[arg(long)]
    expected_policy_generation: u64,
    /// `true` or `false`, as the status read prints it.
    #[arg(long, action = clap::ArgAction::Set)]
    expected_requires_nip_fi: bool,
    /// Where the request is written before it is sent (must not exist yet).
    #[arg(long)]
    request_file: PathBuf,
}

#[derive(Subcommand)]
pub enum NipFiCommand {
    /// Require NIP-FI for a community (CAS on the current generation and flag).
    Enable {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        pre: Preconditions,
        #[arg(long)]
        expected_issuer: String,
    },
    /// Make NIP-FI optional again (CAS on the current generation and flag).
    Disable {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        pre: Preconditions,
    },
    /// Re-send a request file written by enable/disable (fresh signature, same operation).
    Retry {
        #[command(flatten)]
        conn: Conn,
        #[arg(long)]
        request_file: PathBuf,
    },
    /// The current stored policy with the exact expected precondition fields.
    Status {
        #[command(flatten)]
        conn: Conn,
        #[arg(long)]
        community_id: uuid::Uuid,
        #[arg(long)]
        expected_host: String,
    },
    /// One of this operator's receipts.
    Receipt {
        #[command(flatten)]
        conn: Conn,
        #[arg(long)]
        operation_id: uuid::Uuid,
    },
}

pub async fn run(cmd: NipFiCommand) -> i32 {
    match cmd {
        NipFiCommand::Enable { conn, pre, expected_issuer } => {
            let mut body = request(&pre, true);
            body["expected_issuer"] = json!(expected_issuer);
            write_and_send(&conn, &pre.request_file, &body).await
        }
        NipFiCommand::Disable { conn, pre } => {
            write_and_send(&conn, &pre.request_file, &request(&pre, false)).await
        }
        NipFiCommand::Retry { conn, request_file } => match std::fs::read(&request_file) {
            Ok(bytes) => send(&conn, reqwest::Method::POST, POLICY_PATH, bytes).await,
            Err(e) => local_error(&format!("cannot read {}: {e}", request_file.display())),
        },
        NipFiCommand::Status { conn, community_id, expected_host } => {
            let path = format!("{POLICY_PATH}?community_id={community_id}&expected_host={expected_host}");
            send(&conn, reqwest::Method::GET, &path, Vec::new()).await
        }
        NipFiCommand::Receipt { conn, operation_id } => {
            send(
                &conn,
                reqwest::Method::GET,
                &format!("{POLICY_PATH}?operation_id={operation_id}"),
                Vec::new(),
            )
            .await
        }
    }
}

fn request(pre: &Preconditions, desired: bool) -> Value {
    json!({
        "operation_id": uuid::Uuid::new_v4(),
        "community_id": pre.community_id,
        "expected_host": pre.expected_host,
        "actor_pubkey": pre.actor_pubkey,
        "expected_owner_pubkey": pre.expected_owner_pubkey,
        "requires_nip_fi": desired,
        "expected_policy_generation": pre.expected_policy_generation,
        "expected_requires_nip_fi": pre.expected_requires_nip_fi,
    })
}

fn local_error(message: &str) -> i32 {
    eprintln!("error: {message}");
    1
}

/// Writes the request (refusing to overwrite an earlier one) and its UUID, then sends it.
async fn write_and_send(conn: &Conn, file: &PathBuf, body: &Value) -> i32 {
    let bytes = body.to_string().into_bytes();
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes).and_then(|()| f.sync_all()));
    if let Err(e) = written {
        return local_error(&format!("cannot write the request file {}: {e}", file.display()));
    }
    eprintln!(
        "request written to {} (operation_id {}); after a lost response run `buzz operator nip-fi retry --request-file {}`",
        file.display(),
        body["operation_id"].as_str().unwrap_or_default(),
        file.display()
    );
    send(conn, reqwest::Method::POST, POLICY_PATH, bytes).await
}

/// Sends a freshly signed request, prints the answer and maps it to the exit code.
async fn send(conn: &Conn, method: reqwest::Method, path: &str, body: Vec<u8>) -> i32 {
    let Some(keys) = buzz_core::Keys::from_secret_hex(&conn.secret_key) else {
        return local_error("the secret key must be 64 hex characters");
    };
    let url = format!("{}{path}", conn.url.trim_end_matches('/'));
    let auth = buzz_core::nip98::authorization_header(&keys, method.as_str(), &url, &body);
    let mut req = reqwest::Client::new().request(method, &url).header("authorization", auth);
    if !body.is_empty() {
        req = req.header("content-type", "application/json").body(body);
    }
    let res = match req.send().await {
        Ok(res) => res,
        Err(e) => {
            eprintln!("error: request failed: {e}");
            return 5;
        }
    };
    let status = res.status();
    let text = res.text().await.unwrap_or_default();
    println!("{text}");
    let Ok(value) = serde_json::from_str::<Value>(&text) else {
        eprintln!("error: HTTP {status}: the answer is not JSON");
        return 5;
    };
    if !status.is_success() {
        eprintln!("error: HTTP {status}");
        return 5;
    }
    exit_code(&value)
}

/// 0 applied, 10 pending, 11 superseded, 12 unavailable; a current-state read is 0; anything
/// else is a response error (5).
#[must_use]
pub fn exit_code(value: &Value) -> i32 {
    match value.get("receipt").map(|r| r["state"].as_str()) {
        None if value.get("policy_generation").is_some() => 0,
        Some(Some("applied")) => 0,
        Some(Some("pending")) => 10,
        Some(Some("superseded")) => 11,
        Some(Some("unavailable")) => 12,
        _ => {
            eprintln!("error: unexpected answer");
            5
        }
    }
}
