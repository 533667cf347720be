//! An in-process cluster on real dependencies.

use std::net::SocketAddr;
use std::time::Duration;

use buzz_core::{CommunityId, Keys};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::replicas::{spawn_snapshot, SnapshotReplica};

/// The shape of a test cluster: replicas per service and settings to vary.
#[derive(Debug, Clone, Copy)]
pub struct ClusterOptions {
    /// Gateway replicas.
    pub gateways: usize,
    /// Write-service replicas.
    pub writers: usize,
    /// Query-service replicas.
    pub queriers: usize,
    /// `statement_timeout` of the query-service replicas, in milliseconds.
    pub statement_timeout_ms: u64,
    /// Adjusts every gateway's settings before it starts (e.g. low rate limits).
    pub gateway_settings: Option<fn(&mut buzz_gateway::Settings)>,
    /// Redis of the gateways (e.g. a private server a test pauses); default `REDIS_URL`.
    pub gateway_redis_url: Option<&'static str>,
    /// Snapshot-service replicas (two by default: no session affinity).
    pub snapshots: usize,
    /// A Redis of its own for the snapshot-service (fault tests stop and restart it).
    pub snapshot_redis_url: Option<&'static str>,
    /// Adjusts every snapshot replica's settings before it starts (e.g. low time limits).
    pub snapshot_settings: Option<fn(&mut buzz_snapshot::Settings)>,
    /// Policy-service replicas (each with its own operator listener; `policies`).
    pub policy_replicas: usize,
    /// Adjusts every policy-service replica's NIP-FI settings before it starts.
    pub nip_fi: Option<fn(&mut buzz_fi::FiSettings)>,
    /// Adjusts every policy-service replica's settings before it starts (e.g. import limits).
    pub policy_settings: Option<fn(&mut buzz_policy::Settings)>,
    /// Adjusts every write-service replica's settings before it starts (e.g. no background sweeps).
    pub write_settings: Option<fn(&mut buzz_write::Settings)>,
    /// Adjusts every query-service replica's settings before it starts (e.g. community shares).
    pub query_settings: Option<fn(&mut buzz_query::Settings)>,
    /// Migrate the cluster's database only this far (a previous release's schema); default: all.
    pub schema_version: Option<i64>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            gateways: 2,
            writers: 2,
            queriers: 2,
            statement_timeout_ms: 2000,
            gateway_settings: None,
            gateway_redis_url: None,
            snapshots: 2,
            snapshot_redis_url: None,
            snapshot_settings: None,
            policy_replicas: 1,
            nip_fi: None,
            policy_settings: None,
            write_settings: None,
            query_settings: None,
            schema_version: None,
        }
    }
}

/// A running cluster on its own database, NATS prefix and Redis prefix.
pub struct Cluster {
    /// URL of the cluster's own database.
    pub database_url: String,
    /// Name of the cluster's own database.
    pub database_name: String,
    /// A pool on the cluster's database, for checks in SQL.
    pub pool: sqlx::PgPool,
    /// The cluster's NATS subject prefix.
    pub nats_prefix: String,
    /// The cluster's Redis key prefix.
    pub redis_prefix: String,
    /// Addresses of the gateway replicas.
    pub gateways: Vec<SocketAddr>,
    /// Address of the policy-service's operator API.
    pub policy: SocketAddr,
    /// Every policy-service replica's operator listener (`policy` is the first).
    pub policies: Vec<SocketAddr>,
    /// Admin listeners (`/metrics`, probes) of the gateways, in `gateways` order.
    pub gateway_admins: Vec<SocketAddr>,
    /// Admin listener (`/metrics`, probes) of the first policy-service replica.
    pub policy_admin: SocketAddr,
    /// The operator key the policy-service accepts.
    pub operator: Keys,
    /// A second allowlisted operator key.
    pub operator2: Keys,
    /// The relay's key.
    pub relay: Keys,
    /// Cancels every service.
    pub shutdown: CancellationToken,
    /// Cancels only the gateways (graceful shutdown tests).
    pub gateway_shutdown: CancellationToken,
    /// The running snapshot-service replicas (see [`Cluster::add_snapshot_replica`]).
    pub snapshot_replicas: Vec<SnapshotReplica>,
    snapshot_settings: buzz_snapshot::Settings,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
}

/// A provisioned community and its owner.
#[derive(Debug, Clone)]
pub struct Community {
    /// The community's id.
    pub id: CommunityId,
    /// The Host it is bound to.
    pub host: String,
    /// Its owner's keys.
    pub owner: Keys,
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_owned())
}

/// The server the tests use (`DATABASE_URL`, default the local `postgres` database).
#[must_use]
pub fn base_database_url() -> String {
    env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
}

/// `url` with its database name replaced.
#[must_use]
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let root = match base[scheme_end..].find('/') {
        Some(i) => &base[..scheme_end + i],
        None => base,
    };
    match query {
        Some(q) => format!("{root}/{name}?{q}"),
        None => format!("{root}/{name}"),
    }
}

impl Cluster {
    /// A cluster with the default options.
    pub async fn start() -> Self {
        Self::start_with(ClusterOptions::default()).await
    }

    /// A cluster of `opts`; returns once every replica serves.
    pub async fn start_with(opts: ClusterOptions) -> Self {
        let tag = Uuid::new_v4().simple().to_string();
        let base = base_database_url();
        let nats_url = env("NATS_URL", "nats://127.0.0.1:4222");
        let redis_url = env("REDIS_URL", "redis://127.0.0.1:6379");
        let database_name = format!("buzz_test_{tag}");
        let database_url = with_database(&base, &database_name);
        buzz_store::ensure_database(&database_url).await.expect("create test database");
        let pool = buzz_store::connect(&database_url, 4).await.expect("connect test database");
        let schema = opts.schema_version.unwrap_or(buzz_store::SCHEMA_VERSION);
        buzz_store::migrate_to(&pool, schema).await.expect("migrate");
        let nats_prefix = format!("t{}", &tag[..12]);
        let redis_prefix = format!("test:{tag}:");
        let operator = Keys::generate();
        let operator2 = Keys::generate();
        let relay = Keys::generate();
        let shutdown = CancellationToken::new();
        let gateway_shutdown = shutdown.child_token();
        let loopback0 = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut tasks = Vec::new();

        let (mut policies, mut policy_admins) = (Vec::new(), Vec::new());
        for _ in 0..opts.policy_replicas.max(1) {
            // The operator origin must be known before binding; bind first, then tell the settings.
            let probe = std::net::TcpListener::bind(loopback0).unwrap();
            let policy_addr = probe.local_addr().unwrap();
            drop(probe);
            let mut nip_fi = buzz_fi::FiSettings::default();
            if let Some(tweak) = opts.nip_fi {
                tweak(&mut nip_fi);
            }
            let mut policy_settings = buzz_policy::Settings {
                database_url: database_url.clone(),
                nats: buzz_bus::NatsConfig::new(nats_url.clone()),
                redis: buzz_http_auth::RedisConfig::new(redis_url.clone()),
                nats_prefix: nats_prefix.clone(),
                redis_prefix: redis_prefix.clone(),
                listen: policy_addr,
                admin_listen: loopback0,
                operator_pubkeys: vec![operator.pubkey(), operator2.pubkey()],
                operator_origin: format!("http://{policy_addr}"),
                lease_ms: 1000,
                nip_fi,
                relay_secret_key: Some(relay.secret_hex()),
                import_max_bytes: buzz_policy::settings::IMPORT_MAX_BYTES,
                import_max_line_bytes: buzz_policy::settings::IMPORT_MAX_LINE_BYTES,
                import_max_concurrent: buzz_policy::settings::IMPORT_MAX_CONCURRENT,
            };
            if let Some(tweak) = opts.policy_settings {
                tweak(&mut policy_settings);
            }
            let policy = buzz_policy::Application::build(policy_settings).await.expect("policy-service");
            policy_admins.push(policy.admin_addr());
            tasks.push(tokio::spawn(policy.run(shutdown.clone())));
            policies.push(policy_addr);
        }
        for _ in 0..opts.writers {
            let mut settings = buzz_write::Settings {
                database_url: database_url.clone(),
                nats: buzz_bus::NatsConfig::new(nats_url.clone()),
                nats_prefix: nats_prefix.clone(),
                admin_listen: loopback0,
                max_db_connections: 8,
                concurrency: 64,
                relay_secret_key: relay.secret_hex(),
                ttl_sweep_every: Duration::from_secs(1),
                statement_timeout_ms: 3000,
                lock_timeout_ms: 2000,
                batch: buzz_write::BatchSettings::default(),
            };
            if let Some(adjust) = opts.write_settings {
                adjust(&mut settings);
            }
            let app = buzz_write::Application::build(settings).await.expect("write-service");
            tasks.push(tokio::spawn(app.run(shutdown.clone())));
        }
        for _ in 0..opts.queriers {
            let mut settings = buzz_query::Settings {
                admin_listen: loopback0,
                max_db_connections: 8,
                statement_timeout_ms: opts.statement_timeout_ms,
                ..buzz_query::Settings::local(&database_url, &nats_url, &nats_prefix)
            };
            if let Some(adjust) = opts.query_settings {
                adjust(&mut settings);
            }
            let app = buzz_query::Application::build(settings).await.expect("query-service");
            tasks.push(tokio::spawn(app.run(shutdown.clone())));
        }
        let mut snapshot_settings = buzz_snapshot::Settings::local(
            &database_url,
            &nats_url,
            opts.snapshot_redis_url.unwrap_or(&redis_url),
            &nats_prefix,
            &redis_prefix,
        );
        if let Some(tweak) = opts.snapshot_settings {
            tweak(&mut snapshot_settings);
        }
        let mut snapshot_replicas = Vec::new();
        for _ in 0..opts.snapshots {
            snapshot_replicas.push(spawn_snapshot(&snapshot_settings, &shutdown).await);
        }
        let (mut gateways, mut gateway_admins) = (Vec::new(), Vec::new());
        for _ in 0..opts.gateways {
            let mut settings = buzz_gateway::Settings::local(
                &nats_url,
                opts.gateway_redis_url.unwrap_or(&redis_url),
                &nats_prefix,
                &redis_prefix,
                relay.pubkey(),
            );
            settings.shutdown_grace = Duration::from_secs(2);
            // Gateways read the same `BUZZ_NIP_FI_*` settings as the policy-service.
            if let Some(tweak) = opts.nip_fi {
                tweak(&mut settings.nip_fi);
            }
            if let Some(tweak) = opts.gateway_settings {
                tweak(&mut settings);
            }
            let app =
                buzz_gateway::Application::build(settings, gateway_shutdown.clone()).await.expect("gateway");
            gateways.push(app.addr());
            gateway_admins.push(app.admin_addr());
            tasks.push(tokio::spawn(app.run()));
        }
        let cluster = Self {
            database_url,
            database_name,
            pool,
            nats_prefix,
            redis_prefix,
            gateways,
            policy: policies[0],
            policies,
            gateway_admins,
            policy_admin: policy_admins[0],
            operator,
            operator2,
            relay,
            shutdown,
            gateway_shutdown,
            snapshot_replicas,
            snapshot_settings,
            tasks,
        };
        cluster.wait_ready().await;
        cluster
    }

    /// Polls the gateways' and policy-service's `/readyz` until they answer 200 (no fixed sleeps).
    async fn wait_ready(&self) {
        let client = reqwest::Client::new();
        let mut urls: Vec<String> = self.gateways.iter().map(|a| format!("http://{a}/readyz")).collect();
        urls.extend(self.policies.iter().map(|p| format!("http://{p}/readyz")));
        urls.extend(self.snapshot_replicas.iter().map(|r| format!("http://{}/readyz", r.admin)));
        for url in urls {
            eventually(Duration::from_secs(10), || {
                let client = client.clone();
                let url = url.clone();
                async move { client.get(&url).send().await.is_ok_and(|r| r.status().is_success()) }
            })
            .await;
        }
    }

    /// `POST /operator/communities`, signed by the operator key.
    pub async fn operator_request(
        &self,
        method: reqwest::Method,
        path_and_query: &str,
        body: Option<&serde_json::Value>,
        signer: &Keys,
    ) -> reqwest::Response {
        let url = format!("http://{}{path_and_query}", self.policy);
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let auth = buzz_core::nip98::authorization_header(signer, method.as_str(), &url, &bytes);
        let mut req = reqwest::Client::new().request(method, &url).header("authorization", auth);
        if !bytes.is_empty() {
            req = req.header("content-type", "application/json").body(bytes);
        }
        req.send().await.unwrap()
    }

    /// [`Cluster::operator_request`] signed by the operator key: the status and the JSON body.
    pub async fn operator_json(
        &self,
        method: reqwest::Method,
        path_and_query: &str,
        body: Option<&serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let res = self.operator_request(method, path_and_query, body, &self.operator).await;
        let status = res.status().as_u16();
        (status, res.json().await.unwrap())
    }

    /// `GET /` (NIP-11) of gateway `g` for `host`: the status and the JSON body (`Null` when the
    /// body is not JSON).
    pub async fn nip11(&self, g: usize, host: &str) -> (u16, serde_json::Value) {
        let res = reqwest::Client::new()
            .get(format!("http://{}/", self.gateways[g]))
            .header("host", host)
            .header("accept", "application/nostr+json")
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap_or_default())
    }

    /// Provisions a community bound to `host` with a fresh owner key.
    pub async fn community(&self, host: &str) -> Community {
        let owner = Keys::generate();
        let id = CommunityId::new_v4();
        let body =
            serde_json::json!({ "community_id": id, "host": host, "owner_pubkey": owner.public_hex() });
        let res = self
            .operator_request(reqwest::Method::POST, "/operator/communities", Some(&body), &self.operator)
            .await;
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap_or_default());
        Community { id, host: host.to_owned(), owner }
    }

    /// A signed tenant HTTP request to gateway `g` for `community` (NIP-98 `u` = https://host/path).
    pub async fn tenant_request(
        &self,
        g: usize,
        community: &Community,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
        signer: &Keys,
    ) -> reqwest::Response {
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let signed_url = format!("https://{}{path}", community.host);
        let auth = buzz_core::nip98::authorization_header(signer, method.as_str(), &signed_url, &bytes);
        let mut req = reqwest::Client::new()
            .request(method, format!("http://{}{path}", self.gateways[g]))
            .header("host", &community.host)
            .header("authorization", auth);
        if !bytes.is_empty() {
            req = req.header("content-type", "application/json").body(bytes);
        }
        req.send().await.unwrap()
    }

    /// A tenant HTTP request to gateway `g` with `Authorization: Bearer <token>`.
    pub async fn bearer_request(
        &self,
        g: usize,
        community: &Community,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
        token: &str,
    ) -> reqwest::Response {
        let mut req = reqwest::Client::new()
            .request(method, format!("http://{}{path}", self.gateways[g]))
            .header("host", &community.host)
            .header("authorization", format!("Bearer {token}"));
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b.to_string());
        }
        req.send().await.unwrap()
    }

    /// `POST /api/tokens` signed by `signer` through gateway `g`; the response as is.
    pub async fn issue_token(
        &self,
        g: usize,
        community: &Community,
        signer: &Keys,
        body: &serde_json::Value,
    ) -> reqwest::Response {
        self.tenant_request(g, community, reqwest::Method::POST, "/api/tokens", Some(body), signer).await
    }

    /// Issues a token and returns it; panics unless the relay answers 201.
    pub async fn token(&self, community: &Community, signer: &Keys, body: &serde_json::Value) -> String {
        let res = self.issue_token(0, community, signer, body).await;
        let status = res.status();
        let v: serde_json::Value = res.json().await.unwrap();
        assert_eq!(status, 201, "issue token: {v}");
        v["token"].as_str().unwrap().to_owned()
    }

    /// Adds `keys` to the community as `role`, signed by the owner.
    pub async fn add_member(&self, community: &Community, keys: &Keys, role: &str) {
        let body = serde_json::json!({ "pubkey": keys.public_hex(), "role": role });
        let res = self
            .tenant_request(
                0,
                community,
                reqwest::Method::POST,
                "/api/members",
                Some(&body),
                &community.owner,
            )
            .await;
        assert!(
            res.status().is_success(),
            "add member: {} {}",
            res.status(),
            res.text().await.unwrap_or_default()
        );
    }

    /// A member key, already added.
    pub async fn member(&self, community: &Community) -> Keys {
        let keys = Keys::generate();
        self.add_member(community, &keys, "member").await;
        keys
    }

    /// For tests that seed artifacts by SQL (bypassing the write path): builds their
    /// `artifact_current_tags` rows from the tag rows the seed wrote for their current revisions
    /// (seeds write `type`, `project`, ... rows in `event_tags` only as this input: the write path
    /// keeps no multi-character tag rows there, `buzz_store::tag_rows`), but the derived
    /// `buzz_store::current_tags::DERIVED`, and their home's `h` row, as the write path would have,
    /// and analyses the table.
    pub async fn index_seeded_artifacts(&self, community: CommunityId) {
        sqlx::query(
            "INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at, expires_at, revision, type) \
             SELECT DISTINCT a.community_id, a.d, t.name, t.value_hash, a.home_channel, a.updated_at, e.expires_at, \
                    a.current_revision, a.type \
             FROM artifacts a JOIN events e ON e.community_id = a.community_id AND e.id = a.current_revision \
             CROSS JOIN LATERAL (SELECT t.name, t.value_hash FROM event_tags t \
                                 WHERE t.community_id = a.community_id AND t.event_id = a.current_revision \
                                   AND NOT (t.name = ANY($2)) \
                                 UNION SELECT 'h', sha256(convert_to(a.home_channel::text, 'UTF8'))) t \
             WHERE a.community_id = $1 AND NOT a.deleted AND e.redacted_at IS NULL AND e.deleted_at IS NULL \
             ON CONFLICT DO NOTHING",
        )
        .bind(community)
        .bind(buzz_store::current_tags::DERIVED.to_vec())
        .execute(&self.pool)
        .await
        .unwrap();
        sqlx::query("ANALYZE artifact_current_tags").execute(&self.pool).await.unwrap();
    }

    /// Starts one more snapshot-service replica; returns its index in `snapshot_replicas`.
    pub async fn add_snapshot_replica(&mut self) -> usize {
        let replica = spawn_snapshot(&self.snapshot_settings, &self.shutdown).await;
        self.snapshot_replicas.push(replica);
        self.snapshot_replicas.len() - 1
    }

    /// Stops snapshot replica `i` and waits until it no longer takes requests.
    pub async fn stop_snapshot_replica(&mut self, i: usize) {
        let r = &mut self.snapshot_replicas[i];
        r.shutdown.cancel();
        if let Some(t) = r.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
    }

    /// Stops every service and drops the test database.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        for r in &mut self.snapshot_replicas {
            if let Some(t) = r.task.take() {
                let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
            }
        }
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
        self.pool.close().await;
        let admin = with_database(&self.database_url, "postgres");
        if let Ok(pool) = buzz_store::connect(&admin, 1).await {
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.database_name))
                .execute(&pool)
                .await;
        }
    }
}

/// Polls `check` until it is true or `within` passes (then panics).
pub async fn eventually<F, Fut>(within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "condition not met within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
