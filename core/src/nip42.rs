//! NIP-42 AUTH event checks (kind 22242).

use crate::event::Event;

pub const AUTH_KIND: u32 = 22242;

/// Checks kind, `challenge` tag equal to `challenge`, `relay` tag equal to `ws://<host>` or
/// `wss://<host>` (a trailing `/` allowed; `host` is already normalised, compare the tag's host part
/// normalised too), and `created_at` within 600 s of `now`. Does NOT check id/signature (the caller
/// already did). Errors are the text after the `invalid: ` / `auth-required: ` prefix chosen by the caller.
pub fn validate_auth_event(event: &Event, challenge: &str, host: &str, now: i64) -> Result<(), String> { todo!() }
