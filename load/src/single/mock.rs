//! Test-only in-process relay that follows the buzz-relay contract the tool relies on (Host-bound
//! community, NIP-42 AUTH for members, NIP-98 member/operator APIs, kind 9007 channel creation,
//! live fan-out), or a plain relay without auth. Every check uses buzz-core's own validators.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use buzz_core::{ClientMessage, Event, Limits, RelayMessage};
use tokio::sync::broadcast;

#[derive(Default)]
struct Community {
    host: String,
    owner: String,
    members: HashSet<String>,
    channels: HashSet<String>,
}

struct Mock {
    buzz: bool,
    operator: String,
    community: Mutex<Option<Community>>,
    used_nip98: Mutex<HashSet<String>>,
    fanout: broadcast::Sender<Arc<Event>>,
    /// How many NIP-98 requests each path accepted.
    accepted_http: Mutex<HashMap<String, usize>>,
}

/// A running mock: `addr` is `127.0.0.1:port`.
pub struct MockRelay {
    pub addr: String,
    state: Arc<Mock>,
}

impl MockRelay {
    /// `buzz = false`: a plain relay (no AUTH, any channel). `buzz = true`: needs provisioning
    /// through the operator API signed by `operator_pubkey`.
    pub async fn start(buzz: bool, operator_pubkey: &str) -> Self {
        let (fanout, _) = broadcast::channel(65_536);
        let state = Arc::new(Mock {
            buzz,
            operator: operator_pubkey.to_string(),
            community: Mutex::new(None),
            used_nip98: Mutex::new(HashSet::new()),
            fanout,
            accepted_http: Mutex::new(HashMap::new()),
        });
        let app = Router::new()
            .route("/", get(ws))
            .route("/api/members", post(add_member))
            .route("/operator/communities", post(provision))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, state }
    }

    pub fn http_count(&self, path: &str) -> usize {
        self.state.accepted_http.lock().expect("lock").get(path).copied().unwrap_or(0)
    }
}

fn host_of(h: &HeaderMap) -> String {
    h.get("host").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

/// Checks a NIP-98 header for `POST http://<host><path>` and returns the signer.
fn nip98(m: &Mock, h: &HeaderMap, path: &str, body: &[u8]) -> Result<String, (StatusCode, String)> {
    let deny = |why: String| Err((StatusCode::UNAUTHORIZED, why));
    let Some(value) = h.get("authorization").and_then(|v| v.to_str().ok()) else {
        return deny("missing authorization".into());
    };
    let ev = match buzz_core::nip98::decode_header(value) {
        Ok(ev) => ev,
        Err(e) => return deny(e.to_string()),
    };
    let url = format!("http://{}{path}", host_of(h));
    if let Err(e) = buzz_core::nip98::validate(&ev, "POST", &url, body, buzz_core::unix_now(), 60) {
        return deny(format!("{e} (expected u={url})"));
    }
    if !m.used_nip98.lock().expect("lock").insert(ev.id.to_string()) {
        return deny("replayed".into());
    }
    *m.accepted_http.lock().expect("lock").entry(path.to_string()).or_default() += 1;
    Ok(ev.pubkey.to_string())
}

async fn provision(State(m): State<Arc<Mock>>, h: HeaderMap, body: axum::body::Bytes) -> Response {
    let signer = match nip98(&m, &h, "/operator/communities", &body) {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    if signer != m.operator {
        return (StatusCode::FORBIDDEN, "not the operator").into_response();
    }
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let (Some(id), Some(host), Some(owner)) =
        (v["community_id"].as_str(), v["host"].as_str(), v["owner_pubkey"].as_str())
    else {
        return (StatusCode::BAD_REQUEST, "bad body").into_response();
    };
    if uuid::Uuid::parse_str(id).is_err() {
        return (StatusCode::BAD_REQUEST, "bad community_id").into_response();
    }
    let c = Community { host: host.into(), owner: owner.into(), ..Default::default() };
    *m.community.lock().expect("lock") = Some(c);
    StatusCode::CREATED.into_response()
}

async fn add_member(State(m): State<Arc<Mock>>, h: HeaderMap, body: axum::body::Bytes) -> Response {
    let signer = match nip98(&m, &h, "/api/members", &body) {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let mut guard = m.community.lock().expect("lock");
    let Some(c) = guard.as_mut().filter(|c| c.host == host_of(&h)) else {
        return (StatusCode::NOT_FOUND, "no community for this host").into_response();
    };
    if signer != c.owner {
        return (StatusCode::FORBIDDEN, "not the owner").into_response();
    }
    if v["role"] != "member" {
        return (StatusCode::BAD_REQUEST, "bad role").into_response();
    }
    match v["pubkey"].as_str() {
        Some(pk) if buzz_core::Pubkey::parse(pk).is_ok() => {
            c.members.insert(pk.to_string());
            StatusCode::OK.into_response()
        }
        _ => (StatusCode::BAD_REQUEST, "bad pubkey").into_response(),
    }
}

async fn ws(State(m): State<Arc<Mock>>, h: HeaderMap, up: WebSocketUpgrade) -> Response {
    let host = host_of(&h);
    up.on_upgrade(move |socket| session(m, host, socket))
}

async fn send(socket: &mut WebSocket, msg: RelayMessage) -> bool {
    socket.send(Message::Text(msg.to_json().into())).await.is_ok()
}

fn ok(id: &buzz_core::EventId, accepted: bool, message: &str) -> RelayMessage {
    RelayMessage::Ok { id: id.clone(), accepted, message: message.into() }
}

/// Handles one EVENT; returns the OK to send.
fn on_event(m: &Mock, ev: Event, authed: Option<&str>) -> RelayMessage {
    if let Err(e) = ev.verify() {
        return ok(&ev.id, false, &e.to_string());
    }
    if m.buzz {
        let mut guard = m.community.lock().expect("lock");
        let Some(c) = guard.as_mut() else { return ok(&ev.id, false, "restricted: no community") };
        if authed != Some(ev.pubkey.as_str()) {
            return ok(&ev.id, false, "auth-required: authenticate first");
        }
        let channel = ev.tag_value("h").unwrap_or_default().to_string();
        match ev.kind {
            9007 if ev.pubkey == c.owner && ev.tag_value("visibility") == Some("open") => {
                c.channels.insert(channel);
                return ok(&ev.id, true, "");
            }
            9 if c.channels.contains(&channel) => {}
            _ => return ok(&ev.id, false, "restricted: not allowed"),
        }
    }
    let id = ev.id.clone();
    let _ = m.fanout.send(Arc::new(ev));
    ok(&id, true, "")
}

async fn session(m: Arc<Mock>, host: String, mut socket: WebSocket) {
    let challenge = uuid::Uuid::new_v4().to_string();
    if m.buzz {
        let bound = m.community.lock().expect("lock").as_ref().is_some_and(|c| c.host == host);
        if !bound || !send(&mut socket, RelayMessage::Auth(challenge.clone())).await {
            return;
        }
    }
    let mut live = m.fanout.subscribe();
    let mut s = Session { m, host, challenge, authed: None, subs: Vec::new() };
    loop {
        let out = tokio::select! {
            frame = socket.recv() => {
                let Some(Ok(Message::Text(text))) = frame else { return };
                s.on_text(text.as_str())
            }
            ev = live.recv() => match ev {
                Ok(ev) => s.on_live(&ev),
                Err(broadcast::error::RecvError::Lagged(_)) => vec![RelayMessage::Notice("lagged".into())],
                Err(broadcast::error::RecvError::Closed) => return,
            },
        };
        for msg in out {
            if !send(&mut socket, msg).await {
                return;
            }
        }
    }
}

/// One socket of the mock relay.
struct Session {
    m: Arc<Mock>,
    /// The Host it was opened with, and the AUTH challenge sent on it.
    host: String,
    challenge: String,
    /// The key it authenticated as.
    authed: Option<String>,
    /// Its subscriptions.
    subs: Vec<(String, Vec<buzz_core::Filter>)>,
}

impl Session {
    /// Answers one client message.
    fn on_text(&mut self, text: &str) -> Vec<RelayMessage> {
        match ClientMessage::parse(text, &Limits::default()) {
            Ok(ClientMessage::Auth(ev)) => vec![self.on_auth(&ev)],
            Ok(ClientMessage::Event(ev)) => vec![on_event(&self.m, *ev, self.authed.as_deref())],
            Ok(ClientMessage::Req { sub_id, filters }) => {
                if self.m.buzz && self.authed.is_none() {
                    vec![RelayMessage::Closed { sub_id, message: "auth-required: x".into() }]
                } else {
                    self.subs.push((sub_id.clone(), filters));
                    vec![RelayMessage::Eose(sub_id)]
                }
            }
            Ok(ClientMessage::Close(sub_id)) => {
                self.subs.retain(|(s, _)| *s != sub_id);
                vec![]
            }
            Ok(_) => vec![],
            Err(e) => vec![RelayMessage::Notice(format!("{e:?}"))],
        }
    }

    /// NIP-42: a valid AUTH by a member (or the owner) authenticates the socket.
    fn on_auth(&mut self, ev: &Event) -> RelayMessage {
        let member = self
            .m
            .community
            .lock()
            .expect("lock")
            .as_ref()
            .is_some_and(|c| c.members.iter().any(|k| *k == ev.pubkey) || c.owner == ev.pubkey);
        let valid = ev.verify().is_ok()
            && buzz_core::nip42::validate_auth_event(ev, &self.challenge, &self.host, buzz_core::unix_now())
                .is_ok();
        if valid && member {
            self.authed = Some(ev.pubkey.to_string());
        }
        let why = match (valid, member) {
            (true, true) => "",
            (true, false) => "restricted: not a member",
            (false, _) => "invalid: bad auth event",
        };
        ok(&ev.id, valid && member, why)
    }

    /// A live event, to every subscription it matches.
    fn on_live(&self, ev: &Event) -> Vec<RelayMessage> {
        self.subs
            .iter()
            .filter(|(_, fs)| fs.iter().any(|f| f.matches(ev)))
            .map(|(s, _)| RelayMessage::Event { sub_id: s.clone(), event_json: ev.to_json() })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::MockRelay;
    use crate::cli::Cli;
    use crate::single::config::Config;

    fn config(args: &[&str]) -> Config {
        let mut v = vec!["buzz-load"];
        v.extend_from_slice(args);
        Config::try_from(Cli::try_parse_from(v).expect("args").single).expect("config")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn plain_mode_end_to_end() {
        let relay = MockRelay::start(false, "").await;
        let url = format!("ws://{}", relay.addr);
        let cfg = config(&[
            "--url",
            &url,
            "--publishers",
            "3",
            "--subscribers",
            "2",
            "--events",
            "60",
            "--duration",
            "5",
            "--in-flight",
            "4",
            "--drain-timeout",
            "2",
        ]);
        let report = crate::single::run::run(&cfg).await.expect("run");
        let r = &report.results;
        assert_eq!((r.sent, r.accepted, r.rejected, r.ok_timeouts), (60, 60, 0, 0), "{report}");
        assert_eq!(r.delivery.expected, 120);
        assert_eq!(r.delivery.delivered, 120, "{report}");
        assert_eq!(r.delivery.duplicates, 0);
        assert_eq!(r.ok_latency.count, 60);
        assert_eq!(r.delivery.latency.count, 120);
        assert!(r.accepted_per_sec > 0.0);
        let text = report.to_string();
        assert!(text.contains("delivered 120 of 120 expected (100.00 %)"), "{text}");
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["results"]["accepted"], 60);
        assert_eq!(json["params"]["publishers"], 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn buzz_mode_provisions_adds_members_and_authenticates() {
        let operator = buzz_core::Keys::generate();
        let relay = MockRelay::start(true, &operator.public_hex()).await;
        // Two "gateways" (the same socket twice) behind one community Host.
        let url = format!("ws://{}", relay.addr);
        let op_url = format!("http://{}", relay.addr);
        let secret = operator.secret_hex();
        let cfg = config(&[
            "--mode",
            "buzz",
            "--url",
            &url,
            "--url",
            &url,
            "--host-header",
            "team.test",
            "--operator-url",
            &op_url,
            "--operator-secret",
            &secret,
            "--publishers",
            "2",
            "--subscribers",
            "3",
            "--duration",
            "1",
            "--rate",
            "200",
            "--drain-timeout",
            "2",
        ]);
        let report = crate::single::run::run(&cfg).await.expect("run");
        let (s, r) = (&report.setup, &report.results);
        assert_eq!(relay.http_count("/operator/communities"), 1);
        assert_eq!(relay.http_count("/api/members"), 5);
        assert_eq!((s.publishers_connected, s.subscribers_connected), (2, 3), "{report}");
        let buzz = s.buzz.as_ref().expect("buzz setup");
        assert!(buzz.community_id.is_some());
        assert!(uuid::Uuid::parse_str(&s.channel).is_ok());
        assert_eq!(r.rejected, 0, "{report}");
        assert!(r.accepted >= 100 && r.accepted <= 201, "{report}");
        assert_eq!(r.delivery.delivered, r.accepted * 3, "{report}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn buzz_mode_setup_fails_cleanly_without_community() {
        // Owner given but the community was never provisioned: setup must fail, not hang.
        let relay = MockRelay::start(true, "").await;
        let url = format!("ws://{}", relay.addr);
        let owner = buzz_core::Keys::generate().secret_hex();
        let cfg = config(&[
            "--mode",
            "buzz",
            "--url",
            &url,
            "--owner-secret",
            &owner,
            "--connect-timeout",
            "2",
            "--duration",
            "1",
        ]);
        let err = crate::single::run::run(&cfg).await.expect_err("no community");
        assert!(format!("{err:#}").contains("404"), "{err:#}");
    }
}
