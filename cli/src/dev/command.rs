//! `buzz dev`: the whole relay in one process on loopback, for local use. The same
//! `Application`s the service binaries run, wired with local defaults, plus a community bound to
//! the gateway's host so that a client can connect at once.

use std::net::SocketAddr;
use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crate::dev::banner::{self, Banner};
use crate::dev::community::{self, DevKeys};

#[derive(clap::Args)]
pub struct DevArgs {
    #[arg(long, env = "DATABASE_URL", default_value = "postgres://postgres@127.0.0.1:5432/buzz_dev")]
    database_url: String,
    #[arg(long, env = "NATS_URL", default_value = "nats://127.0.0.1:4222")]
    nats_url: String,
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis_url: String,
    /// Port 0 picks a free port; the community is bound to `localhost:<port>`.
    #[arg(long, env = "BUZZ_GATEWAY_ADDR", default_value = "127.0.0.1:7777")]
    gateway_addr: SocketAddr,
    /// Port 0 picks a free port.
    #[arg(long, env = "BUZZ_POLICY_ADDR", default_value = "127.0.0.1:7070")]
    policy_addr: SocketAddr,
    /// NATS subject prefix; another prefix keeps two local relays on one NATS apart.
    #[arg(long, env = "BUZZ_NATS_PREFIX", default_value = "buzz")]
    nats_prefix: String,
    #[arg(long, env = "BUZZ_REDIS_PREFIX", default_value = "buzz:")]
    redis_prefix: String,
    /// Where the local relay, operator and owner keys are kept between runs.
    #[arg(long, env = "BUZZ_DEV_DIR", default_value = ".dev")]
    dir: PathBuf,
    // The gateway's write rate limits (`BUZZ_RATE_*`), e.g. raised for load runs.
    #[command(flatten)]
    rate: buzz_gateway::settings::RateLimitArgs,
    // The gateway's slow and idle peer settings (`BUZZ_OUTBOUND_QUEUE_BYTES`, ...).
    #[command(flatten)]
    connections: buzz_gateway::settings::ConnectionLimitArgs,
    // The gateway's stall deadlines (`BUZZ_BUS_RETRY_AFTER_MS`, `BUZZ_REDIS_TIMEOUT_MS`).
    #[command(flatten)]
    stalls: buzz_gateway::settings::StallArgs,
    // The `BUZZ_NIP_FI_*` settings, for the policy-service and the gateway alike.
    #[command(flatten)]
    nip_fi: buzz_fi::FiArgs,
    // Group commit of kind-9 posts (`BUZZ_WRITE_BATCH_MAX`, `BUZZ_WRITE_BATCH_LANES`).
    #[command(flatten)]
    batch: buzz_write::settings::BatchArgs,
}

/// The five services, built (listeners bound) but not yet serving.
struct Services {
    policy: buzz_policy::Application,
    write: buzz_write::Application,
    query: buzz_query::Application,
    snapshot: buzz_snapshot::Application,
    gateway: buzz_gateway::Application,
}

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let _telemetry = buzz_telemetry::init("buzz-dev")?;
    std::fs::create_dir_all(&args.dir)?;
    let dir = std::fs::canonicalize(&args.dir)?;
    let keys = DevKeys::load(&dir)?;

    buzz_store::ensure_database(&args.database_url).await?;
    let mut pool = buzz_store::connect(&args.database_url, 2).await?;
    match buzz_store::migrate(&pool).await {
        Err(buzz_store::StoreError::OldChain) if owns_database(&args.database_url) => {
            // Its own local database, migrated by a development build before 0.1.0: nothing in
            // it is worth keeping that the dev keys do not provision again.
            eprintln!(
                "buzz dev: the database in DATABASE_URL was migrated by a development build older \
                 than 0.1.0; recreating it (the community of the keys in {} is provisioned again)",
                args.dir.display()
            );
            pool.close().await;
            buzz_store::recreate_database(&args.database_url).await?;
            pool = buzz_store::connect(&args.database_url, 2).await?;
            buzz_store::migrate(&pool).await?;
        }
        other => other?,
    }

    let policy_addr = with_free_port(args.policy_addr)?;
    let operator_origin = format!("http://{policy_addr}");
    let shutdown = CancellationToken::new();
    let services = build(&args, &keys, policy_addr, &operator_origin, shutdown.clone()).await?;
    let gateway_addr = services.gateway.addr();
    let metrics_addr = services.gateway.admin_addr();
    let community = community::ensure(&pool, &local_host(gateway_addr.port()), &keys.owner).await?;
    pool.close().await;

    // Before the banner: Ctrl-C as soon as the banner shows must stop the services cleanly.
    let stop_signal = buzz_telemetry::runtime::install_shutdown_signal()?;
    let tasks = spawn(services, &shutdown);
    if let Err(e) = wait_ready(gateway_addr, &community.host).await {
        eprintln!("warning: {e:#}");
    }
    banner::print(&Banner {
        community: &community,
        keys: &keys,
        dir,
        operator_origin,
        gateway_addr,
        metrics_addr,
    });
    stop_signal.await;
    shutdown.cancel();
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("error: {e:#}"),
            Err(e) => eprintln!("error: {e}"),
        }
    }
    println!("stopped");
    Ok(())
}

/// The host a browser or client on this machine uses for the gateway (`localhost`, with the
/// port unless it is the default one, as the gateway normalises hosts).
fn local_host(port: u16) -> String {
    if port == 80 {
        "localhost".to_owned()
    } else {
        format!("localhost:{port}")
    }
}

/// `addr`, or with port 0 a free port on its interface. The operator origin names the port
/// before the policy-service binds it, so port 0 is resolved here.
fn with_free_port(addr: SocketAddr) -> anyhow::Result<SocketAddr> {
    if addr.port() != 0 {
        return Ok(addr);
    }
    Ok(std::net::TcpListener::bind(addr)?.local_addr()?)
}

async fn build(
    args: &DevArgs,
    keys: &DevKeys,
    policy_addr: SocketAddr,
    operator_origin: &str,
    shutdown: CancellationToken,
) -> anyhow::Result<Services> {
    let loopback0 = SocketAddr::from(([127, 0, 0, 1], 0));
    let policy = buzz_policy::Application::build(buzz_policy::Settings {
        database_url: args.database_url.clone(),
        nats: buzz_bus::NatsConfig::new(args.nats_url.clone()),
        redis: buzz_http_auth::RedisConfig::new(args.redis_url.clone()),
        nats_prefix: args.nats_prefix.clone(),
        redis_prefix: args.redis_prefix.clone(),
        listen: policy_addr,
        admin_listen: loopback0,
        operator_pubkeys: vec![keys.operator.pubkey()],
        operator_origin: operator_origin.to_owned(),
        lease_ms: 1000,
        nip_fi: args.nip_fi.clone().into(),
        relay_secret_key: Some(keys.relay.secret_hex()),
        import_max_bytes: buzz_policy::settings::IMPORT_MAX_BYTES,
        import_max_line_bytes: buzz_policy::settings::IMPORT_MAX_LINE_BYTES,
        import_max_concurrent: buzz_policy::settings::IMPORT_MAX_CONCURRENT,
    })
    .await?;
    let write = buzz_write::Application::build(buzz_write::Settings {
        database_url: args.database_url.clone(),
        nats: buzz_bus::NatsConfig::new(args.nats_url.clone()),
        nats_prefix: args.nats_prefix.clone(),
        admin_listen: loopback0,
        max_db_connections: 16,
        concurrency: 64,
        relay_secret_key: keys.relay.secret_hex(),
        ttl_sweep_every: std::time::Duration::from_secs(30),
        statement_timeout_ms: 3000,
        lock_timeout_ms: 2000,
        batch: args.batch.clone().into(),
    })
    .await?;
    let query = buzz_query::Application::build(buzz_query::Settings {
        admin_listen: loopback0,
        ..buzz_query::Settings::local(&args.database_url, &args.nats_url, &args.nats_prefix)
    })
    .await?;
    let snapshot = buzz_snapshot::Application::build(buzz_snapshot::Settings::local(
        &args.database_url,
        &args.nats_url,
        &args.redis_url,
        &args.nats_prefix,
        &args.redis_prefix,
    ))
    .await?;
    let gateway = build_gateway(args, keys, shutdown).await?;
    Ok(Services { policy, write, query, snapshot, gateway })
}

async fn build_gateway(
    args: &DevArgs,
    keys: &DevKeys,
    shutdown: CancellationToken,
) -> anyhow::Result<buzz_gateway::Application> {
    let mut gw = buzz_gateway::Settings::local(
        &args.nats_url,
        &args.redis_url,
        &args.nats_prefix,
        &args.redis_prefix,
        keys.relay.pubkey(),
    );
    gw.listen = args.gateway_addr;
    let mut gw = gw
        .with_rate_limits(&args.rate)
        .with_connection_limits(&args.connections)
        .with_stall_settings(&args.stalls);
    gw.nip_fi = args.nip_fi.clone().into();
    buzz_gateway::Application::build(gw, shutdown).await
}

type Task = tokio::task::JoinHandle<anyhow::Result<()>>;

/// Starts serving; each task ends when `shutdown` is cancelled.
fn spawn(s: Services, shutdown: &CancellationToken) -> Vec<Task> {
    vec![
        tokio::spawn(s.policy.run(shutdown.clone())),
        tokio::spawn(s.write.run(shutdown.clone())),
        tokio::spawn(s.query.run(shutdown.clone())),
        tokio::spawn(s.snapshot.run(shutdown.clone())),
        tokio::spawn(s.gateway.run()),
    ]
}

/// Waits until the gateway answers NIP-11 for `host`, i.e. the policy-service leases the host
/// over NATS, so that what the banner says works the moment it is printed.
async fn wait_ready(gateway: SocketAddr, host: &str) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let res = client
            .get(format!("http://{gateway}/"))
            .header("host", host)
            .header("accept", "application/nostr+json")
            .send()
            .await;
        let last = match res {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => format!("HTTP {}", r.status()),
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("the gateway does not answer for host {host} after 10 s (last: {last})");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// `buzz dev` owns the databases named `buzz_dev...` (its default `buzz_dev`, and the scratch
/// databases of its tests): it may recreate them. Any other database is left to its owner.
fn owns_database(url: &str) -> bool {
    url.parse::<sqlx::postgres::PgConnectOptions>()
        .ok()
        .and_then(|o| o.get_database().map(|d| d.starts_with("buzz_dev")))
        .unwrap_or(false)
}
