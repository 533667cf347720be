//! NIP-98 signed HTTP requests (the members API, the operator API), a fresh signature per request.

use anyhow::{bail, Context, Result};
use buzz_core::Keys;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HOST};

/// A request to `url` with a fresh NIP-98 header (`buzz_core::nip98`, a nonce per request) whose
/// `u` tag is `signed_url`, and `body` as JSON when there is one: its status and text.
pub async fn signed_request(
    http: &reqwest::Client,
    keys: &Keys,
    (method, url, signed_url): (reqwest::Method, &str, &str),
    host: Option<&str>,
    body: Option<&serde_json::Value>,
) -> Result<(reqwest::StatusCode, String)> {
    let what = format!("{method} {url}");
    let bytes = body.map(serde_json::to_vec).transpose()?.unwrap_or_default();
    let auth = buzz_core::nip98::authorization_header(keys, method.as_str(), signed_url, &bytes);
    let mut req = http.request(method, url).header(AUTHORIZATION, auth);
    if let Some(h) = host {
        req = req.header(HOST, h);
    }
    if body.is_some() {
        req = req.header(CONTENT_TYPE, "application/json").body(bytes);
    }
    let resp = req.send().await.with_context(|| what.clone())?;
    let status = resp.status();
    Ok((status, resp.text().await.unwrap_or_default()))
}

/// POSTs `body` (JSON) to `url` ([`signed_request`]); an answer other than 2xx is an error.
pub async fn post_signed(
    http: &reqwest::Client,
    keys: &Keys,
    url: &str,
    signed_url: &str,
    host: Option<&str>,
    body: &serde_json::Value,
) -> Result<()> {
    let (status, text) =
        signed_request(http, keys, (reqwest::Method::POST, url, signed_url), host, Some(body)).await?;
    if !status.is_success() {
        bail!("POST {url}: {status}: {}", text.chars().take(300).collect::<String>());
    }
    Ok(())
}

/// Provisions a new community bound to `host`, owned by `owner`, through the operator API at
/// `operator_url` (`POST <operator-url>/operator/communities`, signed by `operator`); its id.
pub async fn provision(
    http: &reqwest::Client,
    operator: &Keys,
    operator_url: &str,
    host: &str,
    owner: &Keys,
) -> Result<String> {
    let id = uuid::Uuid::new_v4().to_string();
    let url = format!("{}/operator/communities", operator_url.trim_end_matches('/'));
    let body = serde_json::json!({"community_id": id, "host": host, "owner_pubkey": owner.public_hex()});
    post_signed(http, operator, &url, &url, None, &body).await?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn the_same_request_twice_in_one_second_is_signed_twice() {
        // The relay spends each NIP-98 event id once; two identical requests within one second
        // (a retried member addition) must not share one.
        let operator = Keys::generate();
        let relay = crate::single::mock::MockRelay::start(true, &operator.public_hex()).await;
        let url = format!("http://{}/operator/communities", relay.addr);
        let body = json!({
            "community_id": uuid::Uuid::new_v4().to_string(),
            "host": "team.test",
            "owner_pubkey": operator.public_hex(),
        });
        let http = reqwest::Client::new();
        post_signed(&http, &operator, &url, &url, None, &body).await.expect("first");
        post_signed(&http, &operator, &url, &url, None, &body).await.expect("second");
        assert_eq!(relay.http_count("/operator/communities"), 2);
    }
}
