//! Signed HTTP calls: operator API and members API.

use clap::Subcommand;

#[derive(Subcommand)]
pub enum OperatorCommand {
    /// Provision a community bound to a host. Without --owner-pubkey an owner key is generated
    /// and its secret printed once.
    CreateCommunity {
        #[arg(long, env = "BUZZ_OPERATOR_URL", default_value = "http://127.0.0.1:7070")]
        url: String,
        #[arg(long, env = "BUZZ_OPERATOR_SECRET_KEY", hide_env_values = true)]
        secret_key: String,
        #[arg(long)]
        host: String,
        #[arg(long)]
        owner_pubkey: Option<String>,
        #[arg(long)]
        community_id: Option<uuid::Uuid>,
    },
    /// NIP-FI community policy: enable, disable, retry, status, receipt.
    #[command(subcommand)]
    NipFi(crate::nip_fi::NipFiCommand),
    /// Show a community.
    GetCommunity {
        #[arg(long, env = "BUZZ_OPERATOR_URL", default_value = "http://127.0.0.1:7070")]
        url: String,
        #[arg(long, env = "BUZZ_OPERATOR_SECRET_KEY", hide_env_values = true)]
        secret_key: String,
        #[arg(long)]
        community_id: uuid::Uuid,
    },
    /// Export a community (NDJSON, every table and event) into a file, with a progress counter.
    Export {
        #[arg(long, env = "BUZZ_OPERATOR_URL", default_value = "http://127.0.0.1:7070")]
        url: String,
        #[arg(long, env = "BUZZ_OPERATOR_SECRET_KEY", hide_env_values = true)]
        secret_key: String,
        #[arg(long)]
        community_id: uuid::Uuid,
        /// The file to write
        #[arg(long)]
        out: std::path::PathBuf,
        /// No progress counter
        #[arg(long)]
        quiet: bool,
    },
    /// Import an exported community into this deployment, optionally under another host.
    Import {
        #[arg(long, env = "BUZZ_OPERATOR_URL", default_value = "http://127.0.0.1:7070")]
        url: String,
        #[arg(long, env = "BUZZ_OPERATOR_SECRET_KEY", hide_env_values = true)]
        secret_key: String,
        /// The export file
        file: std::path::PathBuf,
        /// Bind the community to this host instead of the exported one
        #[arg(long)]
        host: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum MembersCommand {
    /// Add a member (or change a role) in the community of the gateway URL's host.
    Add {
        /// Gateway base URL, e.g. http://localhost:7777
        #[arg(long, default_value = "http://localhost:7777")]
        url: String,
        #[arg(long, env = "BUZZ_SECRET_KEY", hide_env_values = true)]
        secret_key: String,
        #[arg(long)]
        pubkey: String,
        #[arg(long, default_value = "member")]
        role: String,
    },
    /// Remove a member.
    Remove {
        #[arg(long, default_value = "http://localhost:7777")]
        url: String,
        #[arg(long, env = "BUZZ_SECRET_KEY", hide_env_values = true)]
        secret_key: String,
        #[arg(long)]
        pubkey: String,
    },
}

fn keys(secret: &str) -> Result<buzz_core::Keys, i32> {
    buzz_core::Keys::from_secret_hex(secret).ok_or_else(|| {
        eprintln!("error: the secret key must be 64 hex characters");
        1
    })
}

/// Sends a signed request and prints the JSON answer; exit 0 on 2xx, 5 otherwise.
async fn signed(
    keys: &buzz_core::Keys,
    method: reqwest::Method,
    url: &str,
    body: Option<serde_json::Value>,
) -> i32 {
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let auth = buzz_core::nip98::authorization_header(keys, method.as_str(), url, &bytes);
    let client = reqwest::Client::new();
    let mut req = client.request(method, url).header("authorization", auth);
    if !bytes.is_empty() {
        req = req.header("content-type", "application/json").body(bytes);
    }
    match req.send().await {
        Ok(res) => {
            let status = res.status();
            let text = res.text().await.unwrap_or_default();
            println!("{text}");
            if status.is_success() {
                0
            } else {
                eprintln!("error: HTTP {status}");
                5
            }
        }
        Err(e) => {
            eprintln!("error: request failed: {e}");
            5
        }
    }
}

pub async fn operator(cmd: OperatorCommand) -> i32 {
    match cmd {
        OperatorCommand::NipFi(cmd) => crate::nip_fi::run(cmd).await,
        OperatorCommand::CreateCommunity { url, secret_key, host, owner_pubkey, community_id } => {
            let Ok(keys) = keys(&secret_key) else { return 1 };
            let owner = owner_pubkey.unwrap_or_else(|| {
                let owner = buzz_core::Keys::generate();
                eprintln!(
                    "generated owner key (keep the secret): secret_key={} pubkey={}",
                    owner.secret_hex(),
                    owner.public_hex()
                );
                owner.public_hex()
            });
            let body = serde_json::json!({
                "community_id": community_id.unwrap_or_else(uuid::Uuid::new_v4),
                "host": host,
                "owner_pubkey": owner,
            });
            signed(
                &keys,
                reqwest::Method::POST,
                &format!("{}/operator/communities", url.trim_end_matches('/')),
                Some(body),
            )
            .await
        }
        OperatorCommand::GetCommunity { url, secret_key, community_id } => {
            let Ok(keys) = keys(&secret_key) else { return 1 };
            let url =
                format!("{}/operator/communities?community_id={community_id}", url.trim_end_matches('/'));
            signed(&keys, reqwest::Method::GET, &url, None).await
        }
        OperatorCommand::Export { url, secret_key, community_id, out, quiet } => {
            let Ok(keys) = keys(&secret_key) else { return 1 };
            match buzz_cli::transfer::export(&keys, &url, community_id, &out, quiet).await {
                Ok(rows) => {
                    eprintln!("wrote {rows} lines to {}", out.display());
                    0
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    5
                }
            }
        }
        OperatorCommand::Import { url, secret_key, file, host } => {
            let Ok(keys) = keys(&secret_key) else { return 1 };
            match buzz_cli::transfer::import(&keys, &url, &file, host.as_deref()).await {
                Ok(answer) => {
                    println!("{answer}");
                    0
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    5
                }
            }
        }
    }
}

pub async fn members(cmd: MembersCommand) -> i32 {
    match cmd {
        MembersCommand::Add { url, secret_key, pubkey, role } => {
            let Ok(keys) = keys(&secret_key) else { return 1 };
            let body = serde_json::json!({ "pubkey": pubkey, "role": role });
            signed(
                &keys,
                reqwest::Method::POST,
                &format!("{}/api/members", url.trim_end_matches('/')),
                Some(body),
            )
            .await
        }
        MembersCommand::Remove { url, secret_key, pubkey } => {
            let Ok(keys) = keys(&secret_key) else { return 1 };
            signed(
                &keys,
                reqwest::Method::DELETE,
                &format!("{}/api/members/{pubkey}", url.trim_end_matches('/')),
                None,
            )
            .await
        }
    }
}
