//! The `Host` header as the gateway reads it (`HeaderValue` → `to_str` →
//! `host::normalize_host`, gateway/src/http/request.rs) and community hosts as the operator API takes
//! them (`host::community_host`, policy-service `nip_fi::request::canonical_host`).
//! Asserts: no panic; normalising is idempotent and yields lowercase visible ASCII; a community
//! host is its own normal form and a community host again; loopback is decided on the normal form.
#![no_main]

use buzz_core::host::{community_host, is_loopback_host, normalize_host, MAX_HOST_NAME};
use buzz_policy::nip_fi::request::canonical_host;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = http::HeaderValue::from_bytes(data) else { return };
    let Ok(raw) = value.to_str() else { return };
    let normal = normalize_host(raw);
    if let Some(n) = &normal {
        assert_eq!(normalize_host(n).as_ref(), Some(n), "normalising {raw:?} is not idempotent");
        assert!(n.bytes().all(|b| b.is_ascii_graphic() && !b.is_ascii_uppercase()), "{n:?}");
        assert_eq!(is_loopback_host(raw), is_loopback_host(n));
    } else {
        assert!(!is_loopback_host(raw));
    }
    match community_host(raw) {
        Ok(h) => {
            assert_eq!(normal.as_ref(), Some(&h));
            assert_eq!(community_host(&h).as_ref(), Ok(&h));
            assert_eq!(canonical_host("host", &h).as_ref(), Ok(&h));
            let name = h.rsplit_once(':').filter(|_| !h.ends_with(']')).map_or(h.as_str(), |(n, _)| n);
            assert!(h.starts_with('[') || name.len() <= MAX_HOST_NAME, "{h:?}");
        }
        Err(_) => assert!(canonical_host("host", raw).is_err()),
    }
    if let Ok(h) = canonical_host("host", raw) {
        assert_eq!(h, raw);
    }
});
