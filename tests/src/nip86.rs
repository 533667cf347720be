//! NIP-86 calls for the tests: `POST /` of a community's host with `Content-Type:
//! application/nostr+json+rpc`, NIP-98 signed over the relay URL with the `payload` tag.

use buzz_core::Keys;
use serde_json::{json, Value};

use crate::{Cluster, Community};

/// How a call is authorised.
pub enum Auth<'a> {
    /// NIP-98 signed by this key (with `payload`, as NIP-86 requires).
    Signed(&'a Keys),
    /// NIP-98 signed by this key without the `payload` tag.
    NoPayload(&'a Keys),
    /// `Authorization: Bearer <token>`.
    Bearer(&'a str),
    /// No `Authorization` header.
    None,
}

/// A NIP-98 header for `POST url` without the `payload` tag.
fn header_without_payload(keys: &Keys, url: &str) -> String {
    use base64::Engine as _;
    let tags = vec![
        vec!["u".to_owned(), url.to_owned()],
        vec!["method".to_owned(), "POST".to_owned()],
        vec!["nonce".to_owned(), uuid::Uuid::new_v4().simple().to_string()],
    ];
    let event = keys.sign_new(buzz_core::nip98::HTTP_AUTH_KIND, tags, "");
    format!("Nostr {}", base64::engine::general_purpose::STANDARD.encode(event.to_json()))
}

/// `method` with `params` through gateway `g` to `host`: the status and the body (`Null` when it
/// is not JSON). The signed `u` is `https://<host>/`.
pub async fn call_host(
    cluster: &Cluster,
    g: usize,
    host: &str,
    auth: &Auth<'_>,
    method: &str,
    params: &Value,
) -> (u16, Value) {
    let body = json!({ "method": method, "params": params }).to_string().into_bytes();
    let url = format!("https://{host}/");
    let mut req = reqwest::Client::new()
        .post(format!("http://{}/", cluster.gateways[g]))
        .header("host", host)
        .header("content-type", buzz_core::nip86::CONTENT_TYPE);
    match auth {
        Auth::Signed(k) => {
            req = req.header("authorization", buzz_core::nip98::authorization_header(k, "POST", &url, &body));
        }
        Auth::NoPayload(k) => req = req.header("authorization", header_without_payload(k, &url)),
        Auth::Bearer(t) => req = req.header("authorization", format!("Bearer {t}")),
        Auth::None => {}
    }
    let res = req.body(body).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or_default())
}

/// [`call_host`] on `community`'s host, NIP-98 signed by `signer`.
pub async fn call(
    cluster: &Cluster,
    g: usize,
    community: &Community,
    signer: &Keys,
    method: &str,
    params: &Value,
) -> (u16, Value) {
    call_host(cluster, g, &community.host, &Auth::Signed(signer), method, params).await
}

/// [`call`] that must answer 200; returns the `result`.
pub async fn ok(
    cluster: &Cluster,
    g: usize,
    community: &Community,
    signer: &Keys,
    method: &str,
    params: &Value,
) -> Value {
    let (status, v) = call(cluster, g, community, signer, method, params).await;
    assert_eq!(status, 200, "{method} {params}: {v}");
    assert!(v["error"].is_null(), "{v}");
    v["result"].clone()
}

/// The pubkeys of a `listbannedpubkeys`/`listallowedpubkeys` result.
#[must_use]
pub fn keys_of(result: &Value) -> Vec<String> {
    result.as_array().unwrap().iter().map(|e| e["pubkey"].as_str().unwrap().to_owned()).collect()
}

/// Sends a NIP-42 AUTH by `agent` carrying its owner's `grant` (a NIP-OA `auth` tag) on `ws`;
/// returns the OK's (accepted, message).
pub async fn agent_auth(ws: &mut crate::WsClient, agent: &Keys, grant: &[String]) -> (bool, String) {
    let auth = agent.sign_new(
        22242,
        vec![
            vec!["relay".into(), format!("ws://{}", ws.host)],
            vec!["challenge".into(), ws.challenge.clone()],
            grant.to_vec(),
        ],
        "",
    );
    ws.send_json(&json!(["AUTH", auth])).await;
    ws.ok_for(&auth.id).await
}

/// Sends `event` as `actor` straight to the write-service (`<p>.v1.write`), as a gateway would
/// after its own checks: the write-service's answer, `Ok(message)` or `Err(NIP-01 reason)`.
pub async fn write_over_bus(
    cluster: &Cluster,
    community: &Community,
    actor: buzz_bus::Actor,
    event: buzz_core::Event,
) -> Result<String, String> {
    let url = std::env::var("NATS_URL").ok().filter(|v| !v.is_empty());
    let nats = async_nats::connect(url.as_deref().unwrap_or("nats://127.0.0.1:4222")).await.unwrap();
    let subjects = buzz_bus::Subjects::new(&cluster.nats_prefix).unwrap();
    let req = buzz_bus::WriteRequest::Event { community_id: community.id, actor, event };
    let timeout = std::time::Duration::from_secs(5);
    let reply: Result<buzz_bus::WriteReply, buzz_bus::BusError> =
        buzz_bus::rpc::request(&nats, subjects.write(), &req, timeout).await;
    reply.and_then(|r| r).map(|ok| ok.message).map_err(|e| e.nip01())
}
