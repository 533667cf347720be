//! `Host` header normalisation: lowercase, no trailing dot, no default port (80/443).

use std::net::{Ipv4Addr, Ipv6Addr};

/// Normalises a Host header value; `None` for empty or malformed hosts (whitespace, `/`, `@`, bad port).
///
/// Surrounding whitespace is trimmed, the name is lowercased, one trailing dot of the name is dropped
/// (a name ending in two is refused),
/// `:80` and `:443` are dropped and other ports kept. IPv6 literals must be bracketed (`[::1]:7777`)
/// and come back in their canonical text form. Names may hold ASCII letters, digits, `-`, `.` and `_`.
#[must_use]
pub fn normalize_host(raw: &str) -> Option<String> {
    let s = raw.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let s = s.to_ascii_lowercase();
    let (name, port) = split_host_port(&s)?;
    let name = if let Some(inner) = name.strip_prefix('[') {
        let addr: Ipv6Addr = inner.strip_suffix(']')?.parse().ok()?;
        format!("[{addr}]")
    } else {
        let name = name.strip_suffix('.').unwrap_or(name);
        let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_');
        // A name still ending in a dot (`a..`) is refused: kept, it would normalise again to
        // another host, and a normal form must be its own normal form.
        if name.is_empty() || name.ends_with('.') || !name.bytes().all(ok) {
            return None;
        }
        name.to_owned()
    };
    match port {
        None | Some(80 | 443) => Some(name),
        Some(port) => Some(format!("{name}:{port}")),
    }
}

/// Why a host cannot be provisioned for a community (see [`community_host`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Not a host name or IP address with an optional port.
    #[error("host must be a host name, an IPv4 address or a bracketed IPv6 address, with an optional port")]
    Malformed,
    /// Longer than a DNS name may be.
    #[error("host name is longer than 253 characters")]
    TooLong,
    /// A label is empty or longer than 63 bytes.
    #[error("host labels must be 1 to 63 characters")]
    LabelLength,
    /// A label has a character outside letters, digits and inner hyphens.
    #[error("host labels may hold only letters, digits and hyphens, and may not start or end with a hyphen")]
    LabelSyntax,
}

/// Longest DNS name in its text form (RFC 1035 2.3.4, without the trailing dot).
pub const MAX_HOST_NAME: usize = 253;
/// Longest DNS label.
pub const MAX_HOST_LABEL: usize = 63;

/// A host a community can be bound to: [`normalize_host`], then, unless it is a bracketed IPv6
/// literal, an RFC 1123 name of at most 253 characters whose labels are 1 to 63 letters, digits
/// and hyphens, neither starting nor ending with a hyphen (so no `_`, which [`normalize_host`]
/// lets through for lookups). The port, if any, is kept as normalised.
pub fn community_host(raw: &str) -> Result<String, HostError> {
    let host = normalize_host(raw).ok_or(HostError::Malformed)?;
    let (name, _) = split_host_port(&host).ok_or(HostError::Malformed)?;
    if name.starts_with('[') {
        return Ok(host);
    }
    if name.len() > MAX_HOST_NAME {
        return Err(HostError::TooLong);
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > MAX_HOST_LABEL {
            return Err(HostError::LabelLength);
        }
        let inner_ok = label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !inner_ok || label.starts_with('-') || label.ends_with('-') {
            return Err(HostError::LabelSyntax);
        }
    }
    Ok(host)
}

/// Splits `host[:port]` / `[v6][:port]`; `None` when the port part is present but not a valid port.
fn split_host_port(s: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if s.starts_with('[') {
        let end = s.find(']')?;
        let (name, rest) = s.split_at(end + 1);
        if rest.is_empty() {
            (name, None)
        } else {
            (name, Some(rest.strip_prefix(':')?))
        }
    } else {
        match s.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (s, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => {
            if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(p.parse::<u16>().ok().filter(|n| *n != 0)?)
        }
    };
    Some((name, port))
}

/// True for loopback dev hosts (`localhost`, `127.x.y.z`, `[::1]`, with or without port), where
/// `http://` and `ws://` are accepted.
#[must_use]
pub fn is_loopback_host(host: &str) -> bool {
    let Some(host) = normalize_host(host) else {
        return false;
    };
    let Some((name, _)) = split_host_port(&host) else {
        return false;
    };
    if let Some(inner) = name.strip_prefix('[') {
        return inner
            .strip_suffix(']')
            .and_then(|a| a.parse::<Ipv6Addr>().ok())
            .is_some_and(|a| a.is_loopback());
    }
    name == "localhost" || name.parse::<Ipv4Addr>().is_ok_and(|a| a.octets()[0] == 127)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        let cases = [
            ("Relay.Example.COM", Some("relay.example.com")),
            ("  relay.example.com  ", Some("relay.example.com")),
            ("relay.example.com.", Some("relay.example.com")),
            ("relay.example.com.:443", Some("relay.example.com")),
            ("relay.example.com:80", Some("relay.example.com")),
            ("relay.example.com:8080", Some("relay.example.com:8080")),
            ("relay.example.com:0443", Some("relay.example.com")),
            ("localhost:7777", Some("localhost:7777")),
            ("127.0.0.1:7777", Some("127.0.0.1:7777")),
            ("[::1]:7777", Some("[::1]:7777")),
            ("[::1]", Some("[::1]")),
            ("[0:0:0:0:0:0:0:1]:443", Some("[::1]")),
            ("[2001:DB8::1]:8443", Some("[2001:db8::1]:8443")),
            ("my_host", Some("my_host")),
            ("", None),
            ("   ", None),
            (".", None),
            (":443", None),
            ("relay example.com", None),
            ("relay.example.com/path", None),
            ("user@relay.example.com", None),
            ("relay.example.com?x", None),
            ("relay.example.com#x", None),
            ("relay.example.com:", None),
            ("relay.example.com:abc", None),
            ("relay.example.com:65536", None),
            ("relay.example.com:0", None),
            ("relay.example.com:-1", None),
            ("relay.example.com:80:80", None),
            ("::1", None),
            ("[::1", None),
            ("[::1]x", None),
            ("[::1]:", None),
            ("[zz]", None),
            ("héllo.example", None),
        ];
        for (raw, want) in cases {
            assert_eq!(normalize_host(raw).as_deref(), want, "{raw:?}");
        }
    }

    /// Found by the `host` and `nip42` fuzz targets: a name ending in two dots lost one and came
    /// back still ending in a dot, so normalising again gave another host (`"..:01826"` gave
    /// `".:1826"`, which normalises to nothing, and an AUTH naming it never matched).
    #[test]
    fn a_name_still_ending_in_a_dot_after_dropping_one_is_refused_so_normal_forms_are_fixed_points() {
        for raw in ["  rl....a........ybea..", "..:01826", "a..", "relay.example.com..:443"] {
            assert_eq!(normalize_host(raw), None, "{raw:?}");
        }
        for raw in ["relay.example.com.", "a.b.:8080", "[::1]:443", "Relay.Example.COM"] {
            let normal = normalize_host(raw).unwrap_or_default();
            assert_eq!(normalize_host(&normal).as_ref(), Some(&normal), "{raw:?}");
        }
    }

    #[test]
    fn community_hosts_are_rfc_1123_names_or_ip_literals_of_bounded_length() {
        let longest = format!("{}.{}.{}.{}", "a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61));
        assert_eq!(community_host(&longest).as_deref(), Ok(longest.as_str()));
        assert_eq!(community_host(&format!("{longest}.")).as_deref(), Ok(longest.as_str()));
        assert_eq!(community_host(&format!("{longest}:8443")), Ok(format!("{longest}:8443")));
        for ok in [
            "Team.Example.com",
            "a-1.b",
            "localhost:7777",
            "127.0.0.1",
            "[::1]:7777",
            "xn--bcher-kva.example",
        ] {
            assert!(community_host(ok).is_ok(), "{ok}");
        }
        let cases = [
            (format!("x{longest}"), HostError::TooLong),
            (format!("{}.test", "a".repeat(5000)), HostError::TooLong),
            (format!("{}.test", "a".repeat(64)), HostError::LabelLength),
            ("a..test".into(), HostError::LabelLength),
            ("-a.test".into(), HostError::LabelSyntax),
            ("a-.test".into(), HostError::LabelSyntax),
            ("my_host".into(), HostError::LabelSyntax),
            ("a b".into(), HostError::Malformed),
            ("a.test:99999".into(), HostError::Malformed),
            (String::new(), HostError::Malformed),
        ];
        for (raw, want) in cases {
            assert_eq!(community_host(&raw), Err(want), "{}", &raw[..raw.len().min(20)]);
        }
    }

    #[test]
    fn loopback() {
        for h in [
            "localhost",
            "LOCALHOST:7777",
            "127.0.0.1",
            "127.1.2.3:8080",
            "[::1]",
            "[::1]:7777",
            "localhost.",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in
            ["example.com", "128.0.0.1", "[::2]", "localhost.example.com", "", "10.0.0.1:80", "127.0.0.1/x"]
        {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
