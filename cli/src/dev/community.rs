//! What `buzz dev` keeps between runs: its keys under the dev dir, and the local community bound
//! to its gateway host, provisioned on the first run and found again on every later one.

use std::path::Path;

use buzz_core::CommunityId;
use buzz_policy::communities::store::{self, CreateError};

/// Reads a secret key from `path`, creating it on first use.
pub fn key_file(path: &Path) -> anyhow::Result<buzz_core::Keys> {
    if let Ok(hex) = std::fs::read_to_string(path) {
        return buzz_core::Keys::from_secret_hex(hex.trim())
            .ok_or_else(|| anyhow::anyhow!("{} does not hold a valid secret key", path.display()));
    }
    let keys = buzz_core::Keys::generate();
    std::fs::write(path, keys.secret_hex())?;
    Ok(keys)
}

/// The keys `buzz dev` signs with, each kept in its own file under the dev dir.
pub struct DevKeys {
    /// Signs the relay's own events; its public key is NIP-11 `pubkey`.
    pub relay: buzz_core::Keys,
    /// The one key the local operator API accepts.
    pub operator: buzz_core::Keys,
    /// Owner of the local community.
    pub owner: buzz_core::Keys,
}

impl DevKeys {
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            relay: key_file(&dir.join("relay.key"))?,
            operator: key_file(&dir.join("operator.key"))?,
            owner: key_file(&dir.join("owner.key"))?,
        })
    }
}

/// The community bound to the local gateway host.
pub struct LocalCommunity {
    pub id: CommunityId,
    pub host: String,
    /// Provisioned by this run (false: found from an earlier one).
    pub created: bool,
    /// Its owner when that is not the dev dir's owner key (the database outlived the dev dir).
    pub foreign_owner: Option<String>,
}

/// The community bound to `host`, provisioned with `owner` when there is none.
pub async fn ensure(
    pool: &sqlx::PgPool,
    host: &str,
    owner: &buzz_core::Keys,
) -> anyhow::Result<LocalCommunity> {
    let owner_hex = owner.public_hex();
    if let Some(c) = store::lease(pool, host).await? {
        let foreign_owner = (c.owner_pubkey != owner_hex).then(|| c.owner_pubkey.to_string());
        return Ok(LocalCommunity { id: c.community_id, host: c.host, created: false, foreign_owner });
    }
    let new =
        store::NewCommunity { id: CommunityId::new_v4(), host, owner: &owner_hex, retention_days: None };
    match store::create(pool, &new).await {
        Ok((c, created)) => {
            Ok(LocalCommunity { id: c.community_id, host: c.host, created, foreign_owner: None })
        }
        Err(CreateError::HostConflict) => Err(anyhow::anyhow!(
            "the host {host} is bound to a community that is not active (archived or being deleted); \
             pick another gateway port (BUZZ_GATEWAY_ADDR) or database (DATABASE_URL)"
        )),
        Err(e) => Err(e.into()),
    }
}
