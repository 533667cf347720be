//! Pure Nostr protocol for buzz-relay: events, signatures, filters, client/relay messages, limits,
//! host normalisation, the JSON of the HTTP APIs and the NIP-42 / NIP-98 checks. No I/O lives here.

pub mod artifact_query;
pub mod clock;
pub mod domain;
pub mod error_code;
pub mod event;
pub mod filter;
pub mod hex;
pub mod host;
pub mod http_json;
pub mod ids;
pub mod keys;
pub mod kinds;
pub mod limits;
pub mod message;
pub mod nip42;
pub mod nip86;
pub mod nip98;
pub mod nipar;
pub mod nipoa;
pub mod refusal;

pub use artifact_query::ArtifactForm;
pub use clock::unix_now;
pub use domain::{ChannelType, Lifecycle, Role, Visibility};
pub use error_code::ErrorCode;
pub use event::{Event, EventError, UnsignedEvent};
pub use filter::{Filter, FilterError};
pub use hex::is_lower_hex;
pub use ids::{ChannelId, CommunityId, EventId, IdError, Pubkey, TokenHash};
pub use keys::Keys;
pub use limits::{ArtifactLimits, Limits};
pub use message::{ClientMessage, ParseError, RelayMessage};
