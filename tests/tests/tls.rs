//! TLS to every dependency, through the connection code the services use (`buzz_store::connect` and
//! `migrate` as `buzz migrate` runs them, the bus `connect`, the http-auth Redis pool), against real
//! PostgreSQL, Redis and NATS processes started here with a CA made at test time. Each server only
//! speaks TLS, so a passing test cannot have fallen back to plain TCP.

#![allow(clippy::unwrap_used)]

mod tls_support;

use std::time::Duration;

use buzz_bus::NatsConfig;
use buzz_http_auth::{RedisConfig, ReplayGuard};
use futures::StreamExt as _;
use tls_support::{nats_jwt::Decentralised, Certs};

const LIMIT: Duration = Duration::from_secs(15);

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f).await.unwrap_or_else(|_| panic!("{what} took longer than {LIMIT:?}"))
}

#[tokio::test]
async fn migrate_runs_over_verified_tls_against_a_postgres_that_refuses_plain_connections() {
    let pg_bin = tls_support::pg_bin();
    require!(&format!("{pg_bin}/postgres"), &format!("{pg_bin}/initdb"), "openssl");
    let certs = Certs::new();
    let pg = tls_support::postgres(&certs);
    let base = format!("postgres://postgres@127.0.0.1:{}/buzz_tls", pg.port);

    let plain = within("plain connect", buzz_store::connect(&format!("{base}?sslmode=disable"), 1)).await;
    let err = plain.expect_err("the server rejects connections without TLS").to_string();
    assert!(err.contains("no encryption") || err.contains("pg_hba"), "{err}");

    let other_ca = Certs::new();
    let wrong = format!("{base}?sslmode=verify-full&sslrootcert={}", other_ca.ca.display());
    let err =
        within("wrong CA", buzz_store::ensure_database(&wrong)).await.expect_err("an unknown CA is refused");
    assert!(err.to_string().to_lowercase().contains("certificate"), "{err}");

    // What `buzz migrate` does: create the database if missing, connect, migrate, check.
    let url = format!("{base}?sslmode=verify-full&sslrootcert={}", certs.ca.display());
    within("ensure_database", buzz_store::ensure_database(&url)).await.unwrap();
    let pool = within("connect", buzz_store::connect(&url, 2)).await.unwrap();
    within("migrate", buzz_store::migrate(&pool)).await.unwrap();
    buzz_store::check_schema(&pool).await.unwrap();
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(ssl, "the session must be encrypted");
    pool.close().await;

    // The chart's path: the URL from a Secret, the CA mounted and named by the libpq variables.
    // Only this test in this binary touches PostgreSQL, so setting them here races with nothing.
    std::env::set_var("PGSSLMODE", "verify-full");
    std::env::set_var("PGSSLROOTCERT", &certs.ca);
    let from_env = within("connect from PGSSL*", buzz_store::connect(&base, 1)).await;
    std::env::remove_var("PGSSLMODE");
    std::env::remove_var("PGSSLROOTCERT");
    let pool = from_env.unwrap();
    buzz_store::check_schema(&pool).await.unwrap();
    pool.close().await;
}

#[tokio::test]
async fn rediss_with_a_private_ca_carries_the_replay_guard() {
    require!("redis-server", "openssl");
    let certs = Certs::new();
    let redis = tls_support::redis(&certs);
    let url = format!("rediss://127.0.0.1:{}", redis.port);

    let system_roots = RedisConfig::new(&url);
    let connect = buzz_http_auth::connect_redis(&system_roots, 1);
    let err = within("rediss with system roots", connect)
        .await
        .expect_err("a private CA is not in the system roots")
        .to_string();
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    let plain = RedisConfig::new(format!("redis://127.0.0.1:{}", redis.port));
    assert!(within("plain redis", buzz_http_auth::connect_redis(&plain, 1)).await.is_err());

    let config = RedisConfig { url, ca_file: Some(certs.ca.clone()) };
    let pool = within("rediss with CA", buzz_http_auth::connect_redis(&config, 2)).await.unwrap();
    let guard = ReplayGuard::new(pool, "tls-test:");
    let id = buzz_core::EventId::parse(&"e1".repeat(32)).unwrap();
    assert!(guard.first_use(&id).await.unwrap(), "first use is accepted");
    assert!(!guard.first_use(&id).await.unwrap(), "a replay is detected over TLS");
}

#[tokio::test]
async fn nats_over_tls_with_a_credentials_file_round_trips_a_request() {
    require!("nats-server", "openssl");
    let certs = Certs::new();
    let auth = Decentralised::new();
    let nats = tls_support::nats(&certs, &auth.server_config);
    let creds = nats.dir.path("user.creds");
    std::fs::write(&creds, &auth.creds).unwrap();
    let url = format!("tls://127.0.0.1:{}", nats.port);

    let no_ca = NatsConfig { creds_file: Some(creds.clone()), ..NatsConfig::new(&url) };
    assert!(
        within("no CA", Box::pin(buzz_bus::serve::connect(&no_ca, "t"))).await.is_err(),
        "unknown CA must fail"
    );
    let no_creds = NatsConfig { ca_file: Some(certs.ca.clone()), ..NatsConfig::new(&url) };
    let err = within("no creds", Box::pin(buzz_bus::serve::connect(&no_creds, "t")))
        .await
        .expect_err("auth is required");
    assert!(err.to_string().to_lowercase().contains("authoriz"), "{err}");

    let config = NatsConfig { url, ca_file: Some(certs.ca.clone()), creds_file: Some(creds) };
    let client =
        within("connect", Box::pin(buzz_bus::serve::connect(&config, "buzz-tls-test"))).await.unwrap();
    let mut sub = client.subscribe("tls.echo").await.unwrap();
    let responder = client.clone();
    tokio::spawn(async move {
        if let Some(msg) = sub.next().await {
            responder.publish(msg.reply.unwrap(), msg.payload).await.unwrap();
        }
    });
    let reply = within("request", client.request("tls.echo", "ping".into())).await.unwrap();
    assert_eq!(&reply.payload[..], b"ping");
}

#[test]
fn a_missing_nats_credentials_file_is_named_at_connect() {
    let config =
        NatsConfig { creds_file: Some("/nonexistent/user.creds".into()), ..NatsConfig::new("tls://x:1") };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let err = rt.block_on(buzz_bus::serve::connect(&config, "t")).unwrap_err().to_string();
    assert!(err.contains("/nonexistent/user.creds"), "{err}");
}
