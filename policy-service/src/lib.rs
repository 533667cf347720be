//! Policy-service of buzz-relay: the operator HTTP API (communities) and the host → community
//! answers gateways lease over the bus.
//!
//! `app` builds and runs the service. The operator routes share `operator` (state, the signed
//! `Operator` extractor, answers) and are grouped by area: `communities` (create, read, update,
//! lifecycle, audit), `nip_fi` (the NIP-FI policy plane, its lock order and the revalidator),
//! `portability` (export and import); `leases` answers gateways' host leases.

pub mod app;
pub mod communities;
pub mod leases;
pub mod nip_fi;
pub mod operator;
pub mod portability;
pub mod settings;

pub use app::Application;
pub use settings::Settings;
