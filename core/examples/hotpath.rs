//! Hot-path micro benchmark for buzz-core: parsing an EVENT message, id computation, signature
//! verification, signing and live filter matching.
//!
//! Run with `cargo run --release -p buzz-core --example hotpath`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use buzz_core::{ClientMessage, Event, Filter, Keys, Limits};

/// Time budget per measurement.
const TARGET: Duration = Duration::from_millis(1500);

/// Runs `op` repeatedly for about `TARGET` and prints ops/s and ns/op.
fn measure(name: &str, mut op: impl FnMut()) {
    // Warm up and size a batch so the clock is read rarely.
    let mut batch: u64 = 1;
    loop {
        let start = Instant::now();
        for _ in 0..batch {
            op();
        }
        if start.elapsed() >= Duration::from_millis(20) {
            break;
        }
        batch *= 2;
    }
    let start = Instant::now();
    let mut iterations: u64 = 0;
    while start.elapsed() < TARGET {
        for _ in 0..batch {
            op();
        }
        iterations += batch;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let per_op_ns = elapsed * 1e9 / iterations as f64;
    let ops = iterations as f64 / elapsed;
    println!("{name}: {ops:.0} ops/s ({per_op_ns:.0} ns/op)");
}

fn typical_event(keys: &Keys) -> Event {
    let content = "Shipping the new relay build today. Horizontal scaling works: gateways stay stateless, \
                   writes go through the bus, queries fan out to read replicas. Please test it on staging and report back!";
    let tags = vec![
        vec!["h".to_owned(), "buzz-dev".to_owned()],
        vec!["p".to_owned(), "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d".to_owned()],
        vec!["t".to_owned(), "release".to_owned()],
    ];
    keys.sign_new(9, tags, content)
}

fn main() {
    let keys = Keys::generate();
    let event = typical_event(&keys);
    let limits = Limits::default();
    let message = format!("[\"EVENT\",{}]", event.to_json());
    println!(
        "event: kind {}, {} content bytes, {} tags, message {} bytes",
        event.kind,
        event.content.len(),
        event.tags.len(),
        message.len()
    );

    measure("parse_event_message", || {
        let parsed = ClientMessage::parse(black_box(&message), &limits);
        assert!(matches!(parsed, Ok(ClientMessage::Event(_))));
        black_box(parsed).ok();
    });
    measure("event_verify", || {
        assert!(black_box(&event).verify().is_ok());
    });
    let id = event.compute_id();
    let k = k256::schnorr::SigningKey::from_bytes(&[7u8; 32]).expect("valid");
    measure("sign (BIP-340 only), k256", || {
        black_box(k.sign_raw(black_box(&id), &[1u8; 32]).expect("signs"));
    });
    measure("sign_new (id + BIP-340), libsecp256k1 (now used by Keys)", || {
        black_box(keys.sign_new(9, black_box(event.tags.clone()), black_box(&event.content)));
    });
    measure("compute_id", || {
        black_box(black_box(&event).compute_id());
    });

    let filter_json = serde_json::json!({
        "kinds": [1, 9, 11],
        "authors": [keys.public_hex(), "a".repeat(64)],
        "#h": ["buzz-dev"],
    });
    let filter = Filter::from_value(&filter_json).unwrap_or_default();
    assert!(filter.matches(&event));
    measure("filter_matches", || {
        black_box(black_box(&filter).matches(black_box(&event)));
    });
}
