//! Property tests against a real cluster: a proptest runner with a fixed number of cases per run
//! and a seed that is printed and can be replayed.
//!
//! - `BUZZ_PROPTEST_CASES`: cases per run (default: the test's own, kept small so the test stays
//!   well under a minute: each case writes through the real write path and reads through a gateway).
//! - `BUZZ_PROPTEST_SEED`: the seed (a `u64`); unset, a fresh one is drawn and printed, so a failing
//!   run names the seed that replays it.
//!
//! Failures are not persisted to files (the printed seed replays them); shrinking is bounded, since
//! every shrink step runs against the database too.

use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// A runner of `default_cases` cases (or `BUZZ_PROPTEST_CASES`) seeded by `BUZZ_PROPTEST_SEED` or
/// a fresh seed; returns it with the seed, which the test names when it fails.
#[must_use]
pub fn runner(test: &str, default_cases: u32) -> (TestRunner, u64) {
    let cases =
        std::env::var("BUZZ_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default_cases);
    let seed = std::env::var("BUZZ_PROPTEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0);
    eprintln!("{test}: {cases} cases, seed {seed} (replay with BUZZ_PROPTEST_SEED={seed})");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        max_shrink_iters: 48,
        max_shrink_time: 60_000,
        failure_persistence: None,
        ..Config::default()
    };
    (TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)), seed)
}
