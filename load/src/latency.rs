//! Latency histograms (microsecond resolution), first-few-reasons counters and rates: what both
//! the one-process tool and the distributed tester measure with.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency a histogram tracks (1 hour in µs); larger samples are clamped to it.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;
/// How many distinct rejection reasons (and errors) are kept verbatim.
pub const MAX_REASONS: usize = 5;

/// A latency histogram in microseconds.
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    #[must_use]
    pub fn new() -> Self {
        Self(Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static histogram bounds are valid"))
    }

    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.record_us(us);
    }

    pub fn record_us(&mut self, us: u64) {
        // Bounds are 1..=MAX: clamping keeps `record` infallible.
        let _ = self.0.record(us.clamp(1, MAX_LATENCY_US));
    }

    pub fn merge(&mut self, other: &Self) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.0.add(&other.0);
    }

    /// Samples recorded.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The histogram in hdrhistogram's V2 wire format, base64-encoded (how workers ship it over
    /// NATS).
    pub fn to_base64(&self) -> anyhow::Result<String> {
        use base64::Engine as _;
        let mut buf = Vec::new();
        hdrhistogram::serialization::Serializer::serialize(
            &mut hdrhistogram::serialization::V2Serializer::new(),
            &self.0,
            &mut buf,
        )
        .map_err(|e| anyhow::anyhow!("serializing a histogram: {e:?}"))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(buf))
    }

    /// Reads what [`Latency::to_base64`] wrote; samples outside this tool's bounds are clamped.
    pub fn from_base64(text: &str) -> anyhow::Result<Self> {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| anyhow::anyhow!("histogram is not base64: {e}"))?;
        let h: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| anyhow::anyhow!("bad histogram: {e:?}"))?;
        let mut out = Self::new();
        for v in h.iter_recorded() {
            let _ = out.0.record_n(v.value_iterated_to().clamp(1, MAX_LATENCY_US), v.count_at_value());
        }
        Ok(out)
    }

    #[must_use]
    pub fn summary(&self) -> Summary {
        if self.0.is_empty() {
            return Summary::default();
        }
        Summary {
            count: self.0.len(),
            p50_us: self.0.value_at_quantile(0.50),
            p90_us: self.0.value_at_quantile(0.90),
            p99_us: self.0.value_at_quantile(0.99),
            max_us: self.0.max(),
            mean_us: self.0.mean(),
        }
    }
}

/// Percentiles of one latency histogram, in microseconds (all zero when `count` is 0).
/// Values are hdrhistogram's (3 significant digits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
}

/// The first few distinct messages with how often each occurred, plus a count of the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reasons {
    /// In JSON: `[{"reason": ..., "count": ...}]`.
    #[serde(serialize_with = "reason_objects")]
    pub first: Vec<(String, u64)>,
    /// Occurrences of reasons that did not fit in `first`.
    pub others: u64,
}

fn reason_objects<S: serde::Serializer>(first: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Item<'a> {
        reason: &'a str,
        count: u64,
    }
    s.collect_seq(first.iter().map(|(reason, count)| Item { reason, count: *count }))
}

impl Reasons {
    pub fn add(&mut self, reason: &str) {
        self.add_n(reason, 1);
    }

    /// Adds `n` occurrences of `reason`.
    pub fn add_n(&mut self, reason: &str, n: u64) {
        if let Some(slot) = self.first.iter_mut().find(|(r, _)| r == reason) {
            slot.1 += n;
        } else if self.first.len() < MAX_REASONS {
            self.first.push((reason.to_string(), n));
        } else {
            self.others += n;
        }
    }

    pub fn merge(&mut self, other: &Self) {
        for (r, n) in &other.first {
            self.add_n(r, *n);
        }
        self.others += other.others;
    }

    #[must_use]
    pub fn total(&self) -> u64 {
        self.first.iter().map(|(_, n)| n).sum::<u64>() + self.others
    }
}

/// Events per second; 0 for an empty window.
#[must_use]
pub fn per_sec(count: u64, window: Duration) -> f64 {
    let s = window.as_secs_f64();
    if s > 0.0 {
        count as f64 / s
    } else {
        0.0
    }
}

/// `num / den`; `None` when `den` is 0.
#[must_use]
pub fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: u64, expected: u64) -> bool {
        // hdrhistogram with 3 significant digits: within 0.1 %.
        actual.abs_diff(expected) * 1000 <= expected
    }

    #[test]
    fn percentiles_of_uniform_samples() {
        let mut h = Latency::new();
        for us in 1..=10_000 {
            h.record_us(us);
        }
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        assert!(close(s.p50_us, 5_000), "{s:?}");
        assert!(close(s.p90_us, 9_000), "{s:?}");
        assert!(close(s.p99_us, 9_900), "{s:?}");
        assert!(close(s.max_us, 10_000), "{s:?}");
        assert!((s.mean_us - 5_000.5).abs() < 10.0, "{s:?}");
    }

    #[test]
    fn percentiles_with_a_tail() {
        let mut h = Latency::new();
        for _ in 0..98 {
            h.record(Duration::from_micros(1_000));
        }
        h.record(Duration::from_millis(50));
        h.record(Duration::from_secs(2));
        let s = h.summary();
        assert!(close(s.p50_us, 1_000));
        assert!(close(s.p90_us, 1_000));
        assert!(close(s.p99_us, 50_000), "{s:?}");
        assert!(close(s.max_us, 2_000_000));
    }

    #[test]
    fn empty_and_clamped() {
        assert_eq!(Latency::new().summary(), Summary::default());
        let mut h = Latency::new();
        h.record_us(0);
        h.record(Duration::from_secs(10 * 3600));
        let s = h.summary();
        assert_eq!(s.count, 2);
        assert!(s.p50_us <= 1);
        assert!(close(s.max_us, MAX_LATENCY_US));
    }

    #[test]
    fn merging_histograms() {
        let (mut a, mut b) = (Latency::new(), Latency::new());
        a.record_us(100);
        b.record_us(300);
        b.record_us(300);
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 3);
        assert!(close(s.p50_us, 300));
        assert!(close(s.max_us, 300));
    }

    #[test]
    fn histograms_survive_the_wire() -> anyhow::Result<()> {
        let mut a = Latency::new();
        for us in [5, 500, 50_000, 5_000_000] {
            a.record_us(us);
        }
        let b = Latency::from_base64(&a.to_base64()?)?;
        assert_eq!(a.summary(), b.summary());
        assert!(Latency::from_base64("not base64!").is_err());
        assert!(Latency::from_base64("AAAA").is_err());
        Ok(())
    }

    #[test]
    fn rates() {
        assert!((per_sec(1000, Duration::from_millis(500)) - 2000.0).abs() < 1e-9);
        assert!((per_sec(3, Duration::from_secs(2)) - 1.5).abs() < 1e-9);
        assert!(per_sec(10, Duration::ZERO).abs() < f64::EPSILON);
        assert_eq!(ratio(1, 0), None);
        assert_eq!(ratio(3, 4), Some(0.75));
    }

    #[test]
    fn reasons_keep_first_distinct() {
        let mut r = Reasons::default();
        for i in 0..8 {
            r.add(&format!("r{i}"));
        }
        r.add("r0");
        assert_eq!(r.first.len(), MAX_REASONS);
        assert_eq!(r.first[0], ("r0".to_string(), 2));
        assert_eq!(r.others, 3);
        assert_eq!(r.total(), 9);
        let mut m = Reasons::default();
        m.add("r7");
        m.merge(&r);
        assert_eq!(m.first[0], ("r7".to_string(), 1));
        assert_eq!(m.total(), 10);
        let json = serde_json::to_value(&m).expect("json");
        assert_eq!(json["first"][0], serde_json::json!({"reason": "r7", "count": 1}));
        // r7 plus r0..r3 fill the slots; r4 joins r's three others.
        assert_eq!(json["others"], 4);
    }
}
