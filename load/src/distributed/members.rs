//! The member keys of a run: derived from the run's seed, so the coordinator (which adds them to
//! the community) and every worker (which connects as them) hold the same keys.

use buzz_core::Keys;
use sha2::{Digest, Sha256};

/// Member key `i` of a run: secp256k1 secret = sha256(`seed:i`), re-hashed in the (never seen)
/// case it is not a valid scalar. Coordinator and workers derive the same keys.
#[must_use]
pub fn member_key(seed: &str, i: usize) -> Keys {
    let mut digest = Sha256::digest(format!("{seed}:{i}").as_bytes());
    loop {
        if let Some(k) = Keys::from_secret_hex(&hex::encode(digest)) {
            return k;
        }
        digest = Sha256::digest(digest);
    }
}

/// Whether member key `i` of the pool is a member of the private channel: the even ones.
#[must_use]
pub fn private_member(i: usize) -> bool {
    i.is_multiple_of(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_keys_are_deterministic_and_distinct() {
        let a = member_key("seed", 1);
        assert_eq!(a.public_hex(), member_key("seed", 1).public_hex());
        assert_ne!(a.public_hex(), member_key("seed", 2).public_hex());
        assert_ne!(a.public_hex(), member_key("other", 1).public_hex());
    }
}
