//! NIP-FI (federated identity) pieces shared by the policy-service and the gateway: the global
//! mode and `effective_required`, the issuer trust registry (`BUZZ_NIP_FI_ISSUERS`, inline JWKS
//! or a `jwks_uri` refreshed with a hard staleness deadline) and the `BUZZ_NIP_FI_*` settings.

pub mod evidence;
pub mod mode;
pub mod registry;
pub mod revalidate;
pub mod settings;
pub mod testing;

pub use evidence::{Evidence, EvidenceError};
pub use mode::Mode;
pub use registry::{IssuerConfig, Jwk, Jwks, Registry, TrustError};
pub use settings::{FiArgs, FiSettings};
