//! Lowercase hex, the form of every id, key and signature on the wire.

/// True when `s` is exactly `len` lowercase hex characters.
#[must_use]
pub fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
