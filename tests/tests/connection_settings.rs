//! Issue 14: the outbound queue bound, the auth deadline, the header read timeout and the
//! connection caps are gateway settings with defaults, read from the environment. Its own test
//! binary (process), since it sets environment variables.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

#[test]
fn connection_settings_are_read_from_the_environment_and_zero_is_refused() {
    // This test binary is its own process; the variables reach only it.
    std::env::set_var("BUZZ_RELAY_SECRET_KEY", buzz_core::Keys::generate().secret_hex());
    let d = buzz_gateway::Settings::from_env().unwrap();
    assert_eq!(d.outbound_queue_bytes, 4 << 20);
    assert_eq!(d.auth_timeout, Duration::from_secs(60));
    assert_eq!(d.header_read_timeout, Duration::from_secs(10));
    assert_eq!((d.max_connections_per_ip, d.max_connections), (100, 10_000));
    let vars = [
        ("BUZZ_OUTBOUND_QUEUE_BYTES", "1048576"),
        ("BUZZ_AUTH_TIMEOUT_SECS", "5"),
        ("BUZZ_HEADER_READ_TIMEOUT_SECS", "3"),
        ("BUZZ_MAX_CONNECTIONS_PER_IP", "7"),
        ("BUZZ_MAX_CONNECTIONS", "70"),
    ];
    for (name, value) in vars {
        std::env::set_var(name, "0");
        let err = buzz_gateway::Settings::from_env().unwrap_err().to_string();
        assert!(err.contains(&format!("invalid value for {name}: \"0\": must be positive")), "{err}");
        std::env::set_var(name, value);
    }
    let s = buzz_gateway::Settings::from_env().unwrap();
    assert_eq!(s.outbound_queue_bytes, 1 << 20);
    assert_eq!((s.auth_timeout, s.header_read_timeout), (Duration::from_secs(5), Duration::from_secs(3)));
    assert_eq!((s.max_connections_per_ip, s.max_connections), (7, 70));
}
