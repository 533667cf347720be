//! NIP-42 AUTH event checks (kind 22242).

use crate::event::Event;
use crate::host::normalize_host;

/// The kind of a NIP-42 AUTH event.
pub const AUTH_KIND: u32 = crate::kinds::CLIENT_AUTH;

/// Largest accepted distance between an AUTH event's `created_at` and now, in seconds.
pub const AUTH_WINDOW_SECS: u64 = 600;

/// Checks kind, `challenge` tag equal to `challenge`, `relay` tag equal to `ws://<host>` or
/// `wss://<host>` (a trailing `/` allowed; `host` is already normalised, compare the tag's host part
/// normalised too), and `created_at` within 600 s of `now`. Does NOT check id/signature (the caller
/// already did). Errors are the text after the `invalid: ` / `auth-required: ` prefix chosen by the caller.
pub fn validate_auth_event(event: &Event, challenge: &str, host: &str, now: i64) -> Result<(), String> {
    if event.kind != AUTH_KIND {
        return Err(format!("auth event must be kind {AUTH_KIND}"));
    }
    match event.tag_value("challenge") {
        None => return Err("challenge tag missing".into()),
        Some(c) if c != challenge => return Err("challenge does not match".into()),
        Some(_) => {}
    }
    let relay = event.tag_value("relay").ok_or("relay tag missing")?;
    if !relay_matches(relay, host) {
        return Err("relay tag does not match this relay".into());
    }
    if now.abs_diff(event.created_at) > AUTH_WINDOW_SECS {
        return Err("created_at is more than 600 seconds from now".into());
    }
    Ok(())
}

/// `ws://<host>[/]` or `wss://<host>[/]` (scheme case-insensitive) naming `host`.
fn relay_matches(url: &str, host: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("ws") && !scheme.eq_ignore_ascii_case("wss") {
        return false;
    }
    let authority = match rest.split_once('/') {
        Some((authority, "")) => authority,
        Some(_) => return false,
        None => rest,
    };
    let ours = normalize_host(host).unwrap_or_else(|| host.to_owned());
    normalize_host(authority).is_some_and(|theirs| theirs == ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth_event(tags: &[(&str, &str)], kind: u32, created_at: i64) -> Event {
        Event {
            id: crate::ids::EventId::parse(&"0".repeat(64)).unwrap(),
            pubkey: crate::ids::Pubkey::parse(&"1".repeat(64)).unwrap(),
            created_at,
            kind,
            tags: tags.iter().map(|(k, v)| vec![(*k).to_owned(), (*v).to_owned()]).collect(),
            content: String::new(),
            sig: String::new(),
        }
    }

    const NOW: i64 = 1_700_000_000;

    fn check(relay: &str) -> Result<(), String> {
        let ev = auth_event(&[("relay", relay), ("challenge", "abc")], AUTH_KIND, NOW);
        validate_auth_event(&ev, "abc", "relay.example.com", NOW)
    }

    #[test]
    fn relay_urls() {
        for ok in [
            "wss://relay.example.com",
            "wss://relay.example.com/",
            "ws://relay.example.com",
            "WSS://Relay.Example.com.:443/",
            "wss://relay.example.com:80",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for bad in [
            "https://relay.example.com",
            "wss://other.example.com",
            "wss://relay.example.com/path",
            "wss://relay.example.com//",
            "wss://relay.example.com:7777",
            "wss://relay.example.com?x=1",
            "wss://user@relay.example.com",
            "relay.example.com",
            "",
        ] {
            assert_eq!(check(bad), Err("relay tag does not match this relay".into()), "{bad}");
        }
    }

    #[test]
    fn port_hosts() {
        let ev = auth_event(&[("relay", "ws://localhost:7777/"), ("challenge", "c")], AUTH_KIND, NOW);
        assert_eq!(validate_auth_event(&ev, "c", "localhost:7777", NOW), Ok(()));
        assert!(validate_auth_event(&ev, "c", "localhost", NOW).is_err());
    }

    #[test]
    fn other_checks() {
        let tags = [("relay", "wss://relay.example.com"), ("challenge", "abc")];
        let host = "relay.example.com";
        let ev = auth_event(&tags, 1, NOW);
        assert_eq!(validate_auth_event(&ev, "abc", host, NOW), Err("auth event must be kind 22242".into()));
        let ev = auth_event(&tags[..1], AUTH_KIND, NOW);
        assert_eq!(validate_auth_event(&ev, "abc", host, NOW), Err("challenge tag missing".into()));
        let ev = auth_event(&tags[1..], AUTH_KIND, NOW);
        assert_eq!(validate_auth_event(&ev, "abc", host, NOW), Err("relay tag missing".into()));
        let ev = auth_event(&tags, AUTH_KIND, NOW);
        assert_eq!(validate_auth_event(&ev, "xyz", host, NOW), Err("challenge does not match".into()));
        for (created_at, ok) in
            [(NOW - 600, true), (NOW + 600, true), (NOW - 601, false), (NOW + 601, false), (i64::MIN, false)]
        {
            let ev = auth_event(&tags, AUTH_KIND, created_at);
            assert_eq!(validate_auth_event(&ev, "abc", host, NOW).is_ok(), ok, "{created_at}");
        }
    }
}
