//! `Host` header normalisation: lowercase, no trailing dot, no default port (80/443).

/// Normalises a Host header value; `None` for empty or malformed hosts (whitespace, `/`, `@`, bad port).
#[must_use]
pub fn normalize_host(raw: &str) -> Option<String> { todo!() }

/// True for loopback dev hosts (`localhost`, `127.x.y.z`, `[::1]`, with or without port), where
/// `http://` and `ws://` are accepted.
#[must_use]
pub fn is_loopback_host(host: &str) -> bool { todo!() }
