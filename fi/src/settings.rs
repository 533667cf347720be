//! The `BUZZ_NIP_FI_*` settings, read the same way by every service.

use std::time::Duration;

use buzz_telemetry::settings::{positive, trimmed};

use crate::registry::{parse_issuers, IssuerConfig};
use crate::Mode;

/// What the services run NIP-FI with (from [`FiArgs`]).
#[derive(Debug, Clone)]
pub struct FiSettings {
    /// `BUZZ_NIP_FI_MODE` (default `shadow`: the stored per-community flag is enforced).
    pub mode: Mode,
    /// `BUZZ_NIP_FI_ISSUERS`: the registry policy, a JSON list of `{issuer, jwks}` or
    /// `{issuer, jwks_uri}` (default empty: no issuer is trusted).
    pub issuers: Vec<IssuerConfig>,
    /// `BUZZ_NIP_FI_PROVISION_BINDING`: the one issuer an enable may name (default none: enable is
    /// refused with `issuer_conflict`).
    pub provision_binding: Option<String>,
    /// `BUZZ_NIP_FI_UPGRADES_ENABLED` (default false): the gate of new policy mutations.
    pub upgrades_enabled: bool,
    /// `BUZZ_NIP_FI_MAX_CONNECTION_LIFETIME_SECS` (default 3600).
    pub max_connection_lifetime: Duration,
    /// `BUZZ_NIP_FI_REVALIDATE_INTERVAL_SECS` (default 10).
    pub revalidate_interval: Duration,
    /// `BUZZ_NIP_FI_JWKS_REFRESH_SECS` (default 300): how often a `jwks_uri` is fetched.
    pub jwks_refresh: Duration,
    /// `BUZZ_NIP_FI_JWKS_MAX_AGE_SECS` (default 3600): the hard deadline after the last
    /// successful fetch; past it that issuer's evidence fails closed.
    pub jwks_max_age: Duration,
    /// `BUZZ_NIP_FI_JWKS_TIMEOUT_MS` (default 5000): one fetch's deadline.
    pub jwks_timeout: Duration,
}

impl Default for FiSettings {
    fn default() -> Self {
        Self {
            mode: Mode::Shadow,
            issuers: Vec::new(),
            provision_binding: None,
            upgrades_enabled: false,
            max_connection_lifetime: Duration::from_secs(3600),
            revalidate_interval: Duration::from_secs(10),
            jwks_refresh: Duration::from_secs(300),
            jwks_max_age: Duration::from_secs(3600),
            jwks_timeout: Duration::from_millis(5000),
        }
    }
}

/// The `BUZZ_NIP_FI_*` flags and variables, flattened into the clap `Parser` of each service that
/// reads them (gateway, policy-service, `buzz dev`).
#[derive(Debug, Clone, clap::Args)]
pub struct FiArgs {
    /// NIP-FI mode: off, shadow, enforce or deny_protected
    #[arg(long, env = "BUZZ_NIP_FI_MODE", default_value_t = Mode::Shadow, value_parser = trimmed::<Mode>)]
    nip_fi_mode: Mode,
    /// Registry policy: JSON list of {"issuer", "jwks"} or {"issuer", "jwks_uri"} (default: none trusted)
    #[arg(long, env = "BUZZ_NIP_FI_ISSUERS", hide_env_values = true, value_parser = issuers)]
    nip_fi_issuers: Option<std::vec::Vec<IssuerConfig>>,
    /// The one issuer an enable may name (default: every enable is refused)
    #[arg(long, env = "BUZZ_NIP_FI_PROVISION_BINDING", value_parser = trimmed::<String>)]
    nip_fi_provision_binding: Option<String>,
    /// The gate of new policy mutations
    #[arg(long, env = "BUZZ_NIP_FI_UPGRADES_ENABLED", default_value_t = false, action = clap::ArgAction::Set, value_parser = trimmed::<bool>)]
    nip_fi_upgrades_enabled: bool,
    /// Lifetime cap of FI-admitted sockets, in seconds
    #[arg(long, env = "BUZZ_NIP_FI_MAX_CONNECTION_LIFETIME_SECS", default_value_t = 3600, value_parser = positive::<u64>)]
    nip_fi_max_connection_lifetime_secs: u64,
    /// How often each policy-service replica publishes the required communities, in seconds
    #[arg(long, env = "BUZZ_NIP_FI_REVALIDATE_INTERVAL_SECS", default_value_t = 10, value_parser = positive::<u64>)]
    nip_fi_revalidate_interval_secs: u64,
    /// How often a `jwks_uri` is fetched, in seconds
    #[arg(long, env = "BUZZ_NIP_FI_JWKS_REFRESH_SECS", default_value_t = 300, value_parser = positive::<u64>)]
    nip_fi_jwks_refresh_secs: u64,
    /// Seconds after the last successful fetch past which that issuer fails closed
    #[arg(long, env = "BUZZ_NIP_FI_JWKS_MAX_AGE_SECS", default_value_t = 3600, value_parser = positive::<u64>)]
    nip_fi_jwks_max_age_secs: u64,
    /// Deadline of one JWKS fetch, in milliseconds
    #[arg(long, env = "BUZZ_NIP_FI_JWKS_TIMEOUT_MS", default_value_t = 5000, value_parser = trimmed::<u64>)]
    nip_fi_jwks_timeout_ms: u64,
}

/// Value parser of `BUZZ_NIP_FI_ISSUERS`: unknown fields and duplicate issuers refuse start-up.
fn issuers(raw: &str) -> Result<Vec<IssuerConfig>, String> {
    let raw: String = trimmed(raw)?;
    parse_issuers(&raw)
}

impl From<FiArgs> for FiSettings {
    fn from(a: FiArgs) -> Self {
        Self {
            mode: a.nip_fi_mode,
            issuers: a.nip_fi_issuers.unwrap_or_default(),
            provision_binding: a.nip_fi_provision_binding,
            upgrades_enabled: a.nip_fi_upgrades_enabled,
            max_connection_lifetime: Duration::from_secs(a.nip_fi_max_connection_lifetime_secs),
            revalidate_interval: Duration::from_secs(a.nip_fi_revalidate_interval_secs),
            jwks_refresh: Duration::from_secs(a.nip_fi_jwks_refresh_secs),
            jwks_max_age: Duration::from_secs(a.nip_fi_jwks_max_age_secs),
            jwks_timeout: Duration::from_millis(a.nip_fi_jwks_timeout_ms),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Args {
        #[command(flatten)]
        fi: FiArgs,
    }

    fn settings(args: &[&str]) -> Result<FiSettings, String> {
        let argv = std::iter::once("t").chain(args.iter().copied());
        let a: Args = buzz_telemetry::settings::parse(argv).map_err(|e| e.to_string())?;
        Ok(a.fi.into())
    }

    #[test]
    fn defaults_match_the_documented_ones_and_values_are_checked() {
        let d = settings(&[]).unwrap();
        let e = FiSettings::default();
        assert_eq!(
            (d.mode, d.issuers, d.provision_binding, d.upgrades_enabled),
            (e.mode, e.issuers, e.provision_binding, e.upgrades_enabled)
        );
        assert_eq!(
            (
                d.max_connection_lifetime,
                d.revalidate_interval,
                d.jwks_refresh,
                d.jwks_max_age,
                d.jwks_timeout
            ),
            (
                e.max_connection_lifetime,
                e.revalidate_interval,
                e.jwks_refresh,
                e.jwks_max_age,
                e.jwks_timeout
            )
        );
        let s = settings(&["--nip-fi-mode", " enforce ", "--nip-fi-upgrades-enabled", "true"]).unwrap();
        assert_eq!((s.mode, s.upgrades_enabled), (Mode::Enforce, true));
        let s = settings(&["--nip-fi-provision-binding", "https://idp.example"]).unwrap();
        assert_eq!(s.provision_binding.as_deref(), Some("https://idp.example"));
        assert!(settings(&["--nip-fi-mode", "Shadow"]).unwrap_err().contains("expected off, shadow"));
        assert!(settings(&["--nip-fi-issuers", "{"]).unwrap_err().contains("not valid JSON"));
        assert!(settings(&["--nip-fi-revalidate-interval-secs", "0"])
            .unwrap_err()
            .contains("must be positive"));
    }
}
