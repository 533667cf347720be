//! `buzz dev`: the whole relay in one process on loopback, for local use. The same
//! `Application`s the service binaries run, wired with local defaults.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

#[derive(clap::Args)]
pub struct DevArgs {
    #[arg(long, env = "DATABASE_URL", default_value = "postgres://postgres@127.0.0.1:5432/buzz_dev")]
    database_url: String,
    #[arg(long, env = "NATS_URL", default_value = "nats://127.0.0.1:4222")]
    nats_url: String,
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis_url: String,
    #[arg(long, env = "BUZZ_GATEWAY_ADDR", default_value = "127.0.0.1:7777")]
    gateway_addr: SocketAddr,
    #[arg(long, env = "BUZZ_POLICY_ADDR", default_value = "127.0.0.1:7070")]
    policy_addr: SocketAddr,
    /// Where the local relay and operator keys are kept between runs.
    #[arg(long, env = "BUZZ_DEV_DIR", default_value = ".dev")]
    dir: PathBuf,
}

/// Reads a secret key from `path`, creating it on first use.
fn dev_key(path: &Path) -> anyhow::Result<buzz_core::Keys> {
    if let Ok(hex) = std::fs::read_to_string(path) {
        return buzz_core::Keys::from_secret_hex(hex.trim())
            .ok_or_else(|| anyhow::anyhow!("{} does not hold a valid secret key", path.display()));
    }
    let keys = buzz_core::Keys::generate();
    std::fs::write(path, keys.secret_hex())?;
    Ok(keys)
}

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let _telemetry = buzz_telemetry::init("buzz-dev")?;
    std::fs::create_dir_all(&args.dir)?;
    let relay = dev_key(&args.dir.join("relay.key"))?;
    let operator = dev_key(&args.dir.join("operator.key"))?;

    buzz_store::ensure_database(&args.database_url).await?;
    let pool = buzz_store::connect(&args.database_url, 2).await?;
    buzz_store::migrate(&pool).await?;
    pool.close().await;

    let loopback0 = SocketAddr::from(([127, 0, 0, 1], 0));
    let prefix = "buzz".to_owned();
    let redis_prefix = "buzz:".to_owned();
    let origin = format!("http://{}", args.policy_addr);
    let policy = buzz_policy::Application::build(buzz_policy::Settings {
        database_url: args.database_url.clone(),
        nats_url: args.nats_url.clone(),
        redis_url: args.redis_url.clone(),
        nats_prefix: prefix.clone(),
        redis_prefix: redis_prefix.clone(),
        listen: args.policy_addr,
        operator_pubkeys: vec![operator.public_hex()],
        operator_origin: origin.clone(),
        lease_ms: 1000,
    })
    .await?;
    let write = buzz_write::Application::build(buzz_write::Settings {
        database_url: args.database_url.clone(),
        nats_url: args.nats_url.clone(),
        nats_prefix: prefix.clone(),
        admin_listen: loopback0,
        max_db_connections: 16,
        concurrency: 64,
        relay_secret_key: relay.secret_hex(),
        ttl_sweep_every: std::time::Duration::from_secs(30),
    })
    .await?;
    let query = buzz_query::Application::build(buzz_query::Settings {
        database_url: args.database_url.clone(),
        nats_url: args.nats_url.clone(),
        nats_prefix: prefix.clone(),
        admin_listen: loopback0,
        max_db_connections: 16,
        concurrency: 64,
        statement_timeout_ms: 2000,
    })
    .await?;
    let snapshot = buzz_snapshot::Application::build(buzz_snapshot::Settings {
        nats_url: args.nats_url.clone(),
        redis_url: args.redis_url.clone(),
        admin_listen: loopback0,
    })
    .await?;
    let shutdown = CancellationToken::new();
    let mut gw = buzz_gateway::Settings::local(
        &args.nats_url,
        &args.redis_url,
        &prefix,
        &redis_prefix,
        relay.public_hex(),
    );
    gw.listen = args.gateway_addr;
    let gw = gw.rate_limits_from_env()?.connection_limits_from_env()?;
    let gateway = buzz_gateway::Application::build(gw, shutdown.clone()).await?;

    let host = format!("localhost:{}", gateway.addr().port());
    println!();
    println!("buzz-relay is running (Ctrl-C stops it)");
    println!("  WebSocket URL:  ws://{host}   (a community is bound to the host \"{host}\")");
    println!("  Operator API:   {origin}");
    println!(
        "  Operator key:   {}  (secret in {})",
        operator.public_hex(),
        args.dir.join("operator.key").display()
    );
    println!("  Probes:         http://{}/healthz  /readyz  /metrics", gateway.addr());
    println!();
    println!("Provision a first community (prints a new owner key):");
    println!("  cargo run -q -p buzz-cli -- operator create-community --url {origin} \\");
    println!("      --secret-key $(cat {}) --host {host}", args.dir.join("operator.key").display());
    println!("Then add members with `buzz members add --url http://{host} --secret-key <owner secret> --pubkey <hex>`.");
    println!();

    let tasks = vec![
        tokio::spawn(policy.run(shutdown.clone())),
        tokio::spawn(write.run(shutdown.clone())),
        tokio::spawn(query.run(shutdown.clone())),
        tokio::spawn(snapshot.run(shutdown.clone())),
        tokio::spawn(gateway.run()),
    ];
    buzz_telemetry::runtime::shutdown_signal().await;
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
