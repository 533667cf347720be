//! `buzz admin <method> [params...]`: one NIP-86 call to a community's relay URL, NIP-98 signed
//! (with the `payload` tag) by the owner's or an admin's key, from `--secret-key`
//! (`BUZZ_SECRET_KEY`) or `--key-file`. A parameter that reads as an integer is sent as a number
//! (`allowkind 9`), any other as a string. Prints the `{"result", "error"}` answer; exit 0 when
//! the call succeeded, 5 otherwise, 1 on a usage error.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct AdminArgs {
    /// The NIP-86 method, e.g. banpubkey, listallowedpubkeys, changerelayname.
    method: String,
    /// Its parameters, in order (e.g. a pubkey and a reason).
    params: Vec<String>,
    /// The community's relay URL (its host), e.g. https://team.example.com
    #[arg(long, default_value = "http://localhost:7777")]
    url: String,
    /// Send to `--url` but for this community host (the `Host` header; the signature names
    /// `https://<host>/`), e.g. to call one gateway replica directly.
    #[arg(long)]
    host: Option<String>,
    #[arg(long, env = "BUZZ_SECRET_KEY", hide_env_values = true, conflicts_with = "key_file")]
    secret_key: Option<String>,
    /// A file holding the secret key as 64 hex characters.
    #[arg(long)]
    key_file: Option<PathBuf>,
}

fn keys(args: &AdminArgs) -> Result<buzz_core::Keys, String> {
    let hex = match (&args.secret_key, &args.key_file) {
        (Some(hex), _) => hex.clone(),
        (None, Some(path)) => {
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?
        }
        (None, None) => return Err("give --secret-key (or BUZZ_SECRET_KEY) or --key-file".into()),
    };
    buzz_core::Keys::from_secret_hex(hex.trim())
        .ok_or_else(|| "the secret key must be 64 hex characters".into())
}

/// A parameter as NIP-86 takes it: an integer as a number, anything else as a string.
fn param(raw: &str) -> serde_json::Value {
    raw.parse::<u64>().map_or_else(|_| serde_json::Value::String(raw.to_owned()), serde_json::Value::from)
}

/// Runs the call; the exit code.
pub async fn run(args: AdminArgs) -> i32 {
    let keys = match keys(&args) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let params: Vec<serde_json::Value> = args.params.iter().map(|p| param(p)).collect();
    let body = serde_json::json!({ "method": args.method, "params": params }).to_string().into_bytes();
    let base = format!("{}/", args.url.trim_end_matches('/'));
    let signed_url = args.host.as_ref().map_or_else(|| base.clone(), |h| format!("https://{h}/"));
    let auth = buzz_core::nip98::authorization_header(&keys, "POST", &signed_url, &body);
    let mut req = reqwest::Client::new()
        .post(&base)
        .header("authorization", auth)
        .header("content-type", buzz_core::nip86::CONTENT_TYPE);
    if let Some(h) = &args.host {
        req = req.header("host", h);
    }
    match req.body(body).send().await {
        Ok(res) => {
            let status = res.status();
            println!("{}", res.text().await.unwrap_or_default());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_numbers_and_everything_else_a_string() {
        assert_eq!(param("9"), serde_json::json!(9));
        assert_eq!(param("spam"), serde_json::json!("spam"));
        assert_eq!(param("-1"), serde_json::json!("-1"));
    }
}
