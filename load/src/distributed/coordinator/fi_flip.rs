//! The NIP-FI part's coordinator side: a second community (its own host, `fi-<host>`) with the
//! FI clients' keys as members and the seeded issuer bound, and one flipper that alternates
//! enable and disable of its requirement through the policy-service operator API
//! (`/operator/communities/nip-fi-policy`, CAS on the expected generation). Each flip's operation
//! is retried with the same `operation_id` (idempotent: a committed one answers its receipt)
//! until it is answered. The flipper audits to `DIR/coordinator.ndjson`, one `fi_flip` line per
//! step: `phase` `start` (the request's first send), `ok` (a 2xx answer: `status`,
//! `generation`, `attempts`), `retry` (a 5xx or no answer: `status`/`code` or `msg`) or
//! `fail` (a refusal that ends the operation, e.g. 409 `policy_conflict`; the state is read
//! again before the next flip); every line has `action` (`enable`, `disable`) and `op`.
//!
//! `buzz-load fi-issuers --issuer URL --seed S` prints the `BUZZ_NIP_FI_ISSUERS` value (inline
//! JWKS) of that seeded issuer, for the relay the flipper runs against.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use buzz_core::Keys;
use serde_json::{json, Value};

use crate::distributed::audit::Audit;
use crate::distributed::clock::{sleep_until, unix_us};
use crate::distributed::coordinator::args::CoordinatorArgs;
use crate::distributed::members::member_key;
use crate::distributed::plan::{PartKind, Plan};
use crate::distributed::proto::FiAssignment;

/// Prints the `BUZZ_NIP_FI_ISSUERS` JSON of a seeded test issuer.
#[derive(Debug, Clone, clap::Args)]
pub struct FiIssuersArgs {
    /// The issuer (`iss` of its evidence), e.g. `https://issuer.faults.test`.
    #[arg(long, value_name = "URL")]
    pub issuer: String,
    /// The seed its keys are derived from (give the coordinator the same `--fi-seed`).
    #[arg(long, value_name = "SEED")]
    pub seed: String,
}

/// `buzz-load fi-issuers ...`: prints the JSON, exit 0 (2 on bad flags, clap's).
#[must_use]
pub fn issuers_main(a: &FiIssuersArgs) -> ExitCode {
    let issuer = buzz_fi::testing::TestIssuer::from_seed(&a.issuer, a.seed.as_bytes());
    println!("{}", json!([{ "issuer": a.issuer, "jwks": issuer.jwks() }]));
    ExitCode::SUCCESS
}

/// A signed operator or tenant call: `(status, JSON body)`; the NIP-98 `u` tag is `signed_url`.
async fn signed(
    http: &reqwest::Client,
    keys: &Keys,
    call: (reqwest::Method, &str, &str),
    host: Option<&str>,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    let (status, text) = crate::nip98::signed_request(http, keys, call, host, body).await?;
    Ok((status.as_u16(), serde_json::from_str(&text).unwrap_or(Value::String(text))))
}

/// Fails unless `status` is 2xx.
fn success(what: &str, (status, body): (u16, Value)) -> Result<()> {
    if !(200..300).contains(&status) {
        bail!("{what}: {status} {body}");
    }
    Ok(())
}

/// The NIP-FI part, prepared: what workers get, and the flipper to run during the window.
pub struct FiPart {
    /// The workers' share of it.
    pub assignment: FiAssignment,
    /// The flipper.
    pub flipper: Flipper,
}

/// Creates the second community (when the plan has an `fi` part): provisions it, adds the FI
/// clients' keys (global indexes of the part, keyed as `Ctx::keys`), binds the issuer.
pub async fn prepare(args: &CoordinatorArgs, plan: &Plan, seed: &str, pool: usize) -> Result<Option<FiPart>> {
    let mut first = 0;
    let mut part = None;
    for p in &plan.parts {
        if p.kind == PartKind::Fi {
            part = Some(p.clients);
            break;
        }
        first += p.clients;
    }
    let Some(clients) = part else { return Ok(None) };
    let (Some(op_url), Some(op_secret), Some(issuer), Some(fi_seed)) =
        (&args.community.operator_url, &args.community.operator_secret, &args.fi_issuer, &args.fi_seed)
    else {
        bail!("the fi part needs --operator-url, --operator-secret, --fi-issuer and --fi-seed");
    };
    let op = Keys::from_secret_hex(op_secret.trim()).context("--operator-secret")?;
    let target = plan.targets.first().context("no target")?;
    let host = format!("fi-{}", target.host);
    let http = reqwest::Client::builder().timeout(plan.connect_timeout).build().context("HTTP client")?;
    let owner = Keys::generate();
    let community_id = uuid::Uuid::new_v4().to_string();
    let base = op_url.trim_end_matches('/').to_owned();
    let url = format!("{base}/operator/communities");
    let body = json!({"community_id": community_id, "host": host, "owner_pubkey": owner.public_hex()});
    success(
        "provisioning the fi community",
        signed(&http, &op, (reqwest::Method::POST, &url, &url), None, Some(&body)).await?,
    )?;
    let (members, signed_members) =
        (format!("{}/api/members", target.http_base()), format!("https://{host}/api/members"));
    for g in first..first + clients {
        let body = json!({"pubkey": member_key(seed, g % pool.max(1)).public_hex(), "role": "member"});
        let call = (reqwest::Method::POST, members.as_str(), signed_members.as_str());
        success("adding an fi member", signed(&http, &owner, call, Some(&host), Some(&body)).await?)?;
    }
    let url = format!("{base}/operator/communities/nip-fi-bindings");
    let body = json!({"community_id": community_id, "issuer": issuer});
    success(
        "binding the fi issuer",
        signed(&http, &op, (reqwest::Method::POST, &url, &url), None, Some(&body)).await?,
    )?;
    let audit = match &args.audit {
        Some(dir) => Audit::open(dir, "coordinator")?,
        None => Audit::none(),
    };
    let every = Duration::from_secs_f64(args.fi_flip_every);
    let assignment = FiAssignment { host: host.clone(), issuer: issuer.clone(), seed: fi_seed.clone() };
    let flipper = Flipper { http, op, base, community_id, host, owner, issuer: issuer.clone(), every, audit };
    Ok(Some(FiPart { assignment, flipper }))
}

/// Flips the second community's requirement every `every` during the window.
pub struct Flipper {
    http: reqwest::Client,
    op: Keys,
    base: String,
    community_id: String,
    host: String,
    owner: Keys,
    issuer: String,
    every: Duration,
    audit: Audit,
}

/// What the flipper did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Flips {
    /// Operations answered 2xx.
    pub ok: u64,
    /// Attempts answered 5xx or not at all (retried).
    pub retries: u64,
    /// Operations refused for good.
    pub failed: u64,
}

impl Flipper {
    /// The stored `(policy_generation, requires_nip_fi)`.
    async fn current(&self) -> Result<(i64, bool)> {
        let url = format!(
            "{}/operator/communities/nip-fi-policy?community_id={}&expected_host={}",
            self.base, self.community_id, self.host
        );
        let (status, v) =
            signed(&self.http, &self.op, (reqwest::Method::GET, &url, &url), None, None).await?;
        match (status, v["policy_generation"].as_i64(), v["requires_nip_fi"].as_bool()) {
            (200, Some(g), Some(r)) => Ok((g, r)),
            _ => bail!("reading the fi policy: {status} {v}"),
        }
    }

    /// Runs from `start` to `end` (flips), then answers outstanding operations until `give_up`.
    pub async fn run(self, start: Instant, end: Instant, give_up: Instant) -> Flips {
        let mut flips = Flips::default();
        // A fresh community: generation 0, not required.
        let mut state = Some((0, false));
        let mut next = start + self.every / 2;
        while next < end {
            sleep_until(next).await;
            next += self.every;
            let (generation, required) = match state {
                Some(s) => s,
                None => match self.current().await {
                    Ok(s) => s,
                    Err(e) => {
                        self.audit.log("fi_flip", json!({"phase": "read", "msg": format!("{e:#}")}));
                        continue;
                    }
                },
            };
            state = self.flip(generation, !required, give_up, &mut flips).await;
            // After a long outage the next flip waits half a period, not every missed one at once.
            next = next.max(Instant::now() + self.every / 2);
        }
        self.audit.flush();
        flips
    }

    /// One operation until it is answered: the new state, or `None` when it is unknown.
    async fn flip(
        &self,
        generation: i64,
        enable: bool,
        give_up: Instant,
        flips: &mut Flips,
    ) -> Option<(i64, bool)> {
        let owner = self.owner.public_hex();
        let op_id = uuid::Uuid::new_v4().to_string();
        let mut body = json!({
            "operation_id": op_id, "community_id": self.community_id, "expected_host": self.host,
            "actor_pubkey": owner, "expected_owner_pubkey": owner, "requires_nip_fi": enable,
            "expected_policy_generation": generation, "expected_requires_nip_fi": !enable,
        });
        if enable {
            body["expected_issuer"] = json!(self.issuer);
        }
        let action = if enable { "enable" } else { "disable" };
        // Every line of this operation: its phase, action and id, and what it adds.
        let log = |phase: &str, mut line: Value| {
            line["phase"] = json!(phase);
            line["action"] = json!(action);
            line["op"] = json!(op_id);
            self.audit.log("fi_flip", line);
        };
        let url = format!("{}/operator/communities/nip-fi-policy", self.base);
        let start_us = unix_us();
        log("start", json!({"generation": generation, "us": start_us}));
        let mut attempts = 0;
        loop {
            attempts += 1;
            let post = (reqwest::Method::POST, url.as_str(), url.as_str());
            match signed(&self.http, &self.op, post, None, Some(&body)).await {
                Ok((status @ 200..=299, v)) => {
                    flips.ok += 1;
                    let g = v["receipt"]["accepted_policy_generation"].as_i64();
                    let ok = json!({
                        "status": status, "generation": g, "attempts": attempts, "start_us": start_us,
                    });
                    log("ok", ok);
                    return g.map(|g| (g, enable));
                }
                Ok((status @ 500..=599, v)) => log("retry", json!({"status": status, "code": v["code"]})),
                Ok((status, v)) => {
                    flips.failed += 1;
                    log("fail", json!({"status": status, "code": v["code"], "attempts": attempts}));
                    return None;
                }
                Err(e) => log("retry", json!({"msg": format!("{e:#}")})),
            }
            flips.retries += 1;
            if Instant::now() >= give_up {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
