//! The run report: computed from merged stats, printed for humans and written as JSON.

use std::fmt;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::latency::{per_sec, ratio, Reasons, Summary};
use crate::single::config::{Config, Mode};
use crate::single::setup::BuzzSetup;
use crate::single::stats::{PublisherStats, SubscriberStats};

#[derive(Debug, Clone, Serialize)]
pub struct Params {
    pub mode: Mode,
    pub urls: Vec<String>,
    pub host_header: Option<String>,
    pub publishers: usize,
    pub subscribers: usize,
    /// Target total events/s; `None` = as fast as the in-flight bound allows.
    pub rate: Option<f64>,
    pub in_flight: usize,
    pub duration_secs: f64,
    pub events: Option<u64>,
    pub content_bytes: usize,
    pub connect_timeout_secs: f64,
    pub ok_timeout_secs: f64,
    pub drain_timeout_secs: f64,
}

impl From<&Config> for Params {
    fn from(c: &Config) -> Self {
        Self {
            mode: c.mode,
            urls: c.targets.iter().map(|t| t.url.clone()).collect(),
            host_header: c.host_header.clone(),
            publishers: c.publishers,
            subscribers: c.subscribers,
            rate: c.rate,
            in_flight: c.in_flight,
            duration_secs: c.duration.as_secs_f64(),
            events: c.events,
            content_bytes: c.content_bytes,
            connect_timeout_secs: c.connect_timeout.as_secs_f64(),
            ok_timeout_secs: c.ok_timeout.as_secs_f64(),
            drain_timeout_secs: c.drain_timeout.as_secs_f64(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SetupInfo {
    pub channel: String,
    pub publishers_connected: usize,
    pub subscribers_connected: usize,
    /// Events subscribers got before EOSE (should be 0: the channel is new).
    pub stored_before_eose: u64,
    pub buzz: Option<BuzzSetup>,
    /// Connections that failed to open, AUTH or subscribe.
    pub errors: Reasons,
}

#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    /// accepted × subscribers connected.
    pub expected: u64,
    pub delivered: u64,
    /// delivered / expected; `None` when nothing was expected.
    pub ratio: Option<f64>,
    pub duplicates: u64,
    pub unknown: u64,
    /// Publisher send instant → subscriber receipt, over all subscriber receptions.
    pub latency: Summary,
}

#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// Start → the last publisher stopped sending.
    pub send_window_secs: f64,
    /// Start → the last OK received (the window for `accepted_per_sec`).
    pub ok_window_secs: f64,
    pub sent: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub ok_timeouts: u64,
    pub unmatched_oks: u64,
    pub sent_per_sec: f64,
    pub accepted_per_sec: f64,
    pub rejected_reasons: Reasons,
    /// EVENT sent → OK received, accepted and rejected alike.
    pub ok_latency: Summary,
    pub delivery: Delivery,
    pub errors: Reasons,
    pub notices: Reasons,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub params: Params,
    pub setup: SetupInfo,
    pub results: Results,
}

impl Results {
    /// Derives rates and ratios from the merged stats; `start` is when sending began.
    #[must_use]
    pub fn compute(start: Instant, p: &PublisherStats, s: &SubscriberStats, subscribers: usize) -> Self {
        let since = |t: Option<Instant>| t.map_or(Duration::ZERO, |t| t.saturating_duration_since(start));
        let send_window = since(p.send_end);
        let ok_window = since(p.last_ok).max(send_window);
        let expected = p.accepted * subscribers as u64;
        let ratio = ratio(s.delivered, expected);
        let mut errors = p.errors.clone();
        errors.merge(&s.errors);
        let mut notices = p.notices.clone();
        notices.merge(&s.notices);
        Self {
            send_window_secs: send_window.as_secs_f64(),
            ok_window_secs: ok_window.as_secs_f64(),
            sent: p.sent,
            accepted: p.accepted,
            rejected: p.rejected,
            ok_timeouts: p.ok_timeouts,
            unmatched_oks: p.unmatched_oks,
            sent_per_sec: per_sec(p.sent, send_window),
            accepted_per_sec: per_sec(p.accepted, ok_window),
            rejected_reasons: p.reasons.clone(),
            ok_latency: p.ok_latency.summary(),
            delivery: Delivery {
                expected,
                delivered: s.delivered,
                ratio,
                duplicates: s.duplicates,
                unknown: s.unknown,
                latency: s.delivery_latency.summary(),
            },
            errors,
            notices,
        }
    }
}

/// Microseconds as milliseconds with 3 decimals.
fn ms(us: u64) -> String {
    format!("{}.{:03}", us / 1000, us % 1000)
}

fn write_reasons(f: &mut fmt::Formatter<'_>, title: &str, r: &Reasons) -> fmt::Result {
    if r.total() == 0 {
        return Ok(());
    }
    writeln!(f, "  {title}:")?;
    for (reason, n) in &r.first {
        writeln!(f, "    {n:>8} × {reason}")?;
    }
    if r.others > 0 {
        writeln!(f, "    {:>8} × (other reasons)", r.others)?;
    }
    Ok(())
}

fn write_latency(f: &mut fmt::Formatter<'_>, title: &str, s: &Summary) -> fmt::Result {
    if s.count == 0 {
        return writeln!(f, "  {title:<18} n/a (no samples)");
    }
    writeln!(
        f,
        "  {title:<18} p50 {} ms  p90 {} ms  p99 {} ms  max {} ms  ({} samples)",
        ms(s.p50_us),
        ms(s.p90_us),
        ms(s.p99_us),
        ms(s.max_us),
        s.count
    )
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (p, s, r) = (&self.params, &self.setup, &self.results);
        let mode = match p.mode {
            Mode::Plain => "plain",
            Mode::Buzz => "buzz",
        };
        writeln!(f, "buzz-load report")?;
        writeln!(f, "  mode {mode}, url(s) {}", p.urls.join(", "))?;
        if let Some(h) = &p.host_header {
            writeln!(f, "  host header {h}")?;
        }
        let rate = p.rate.map_or_else(|| "max".to_string(), |r| format!("{r} ev/s"));
        let events = p.events.map_or_else(|| "unbounded".to_string(), |e| e.to_string());
        writeln!(
            f,
            "  publishers {} ({} connected), subscribers {} ({} connected), rate {rate}, in-flight {}/conn, \
             duration {} s, events {events}, content +{} B",
            p.publishers,
            s.publishers_connected,
            p.subscribers,
            s.subscribers_connected,
            p.in_flight,
            p.duration_secs,
            p.content_bytes
        )?;
        writeln!(f, "  channel {}", s.channel)?;
        if let Some(b) = &s.buzz {
            if let Some(c) = &b.community_id {
                writeln!(f, "  provisioned community {c}")?;
            }
            writeln!(f, "  owner {} , members added {}", b.owner_pubkey, b.members_added)?;
        }
        write_reasons(f, "setup errors", &s.errors)?;
        writeln!(f)?;
        writeln!(f, "  sent {} in {:.2} s ({:.1} ev/s)", r.sent, r.send_window_secs, r.sent_per_sec)?;
        writeln!(
            f,
            "  accepted {} ({:.1} ev/s over {:.2} s), rejected {}, OK timeouts {}",
            r.accepted, r.accepted_per_sec, r.ok_window_secs, r.rejected, r.ok_timeouts
        )?;
        write_reasons(f, "rejection reasons", &r.rejected_reasons)?;
        write_latency(f, "OK latency", &r.ok_latency)?;
        let d = &r.delivery;
        let ratio = d.ratio.map_or_else(|| "n/a".to_string(), |x| format!("{:.2} %", x * 100.0));
        writeln!(
            f,
            "  delivered {} of {} expected ({ratio}), duplicates {}, foreign {}",
            d.delivered, d.expected, d.duplicates, d.unknown
        )?;
        write_latency(f, "delivery latency", &d.latency)?;
        write_reasons(f, "errors", &r.errors)?;
        write_reasons(f, "notices", &r.notices)?;
        Ok(())
    }
}

impl Results {
    /// `--require-complete` (the chart's `helm test`): something was sent, every event was accepted
    /// and every subscriber received every accepted event. The reason names what fell short.
    pub fn check_complete(&self) -> Result<(), String> {
        if self.sent == 0 {
            return Err("no event was sent".to_owned());
        }
        if self.accepted != self.sent {
            return Err(format!(
                "{} of {} events accepted ({:?})",
                self.accepted, self.sent, self.rejected_reasons
            ));
        }
        let d = &self.delivery;
        if d.delivered < d.expected {
            return Err(format!("{} of {} expected deliveries received", d.delivered, d.expected));
        }
        Ok(())
    }
}

impl Report {
    pub fn write_json(&self, path: &std::path::Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_math() {
        let start = Instant::now();
        let mut p =
            PublisherStats { sent: 1000, accepted: 900, rejected: 50, ok_timeouts: 50, ..Default::default() };
        p.reasons.add("rate-limited: slow down");
        p.send_end = Some(start + Duration::from_secs(10));
        p.last_ok = Some(start + Duration::from_millis(10_000 + 500));
        for us in [1_000, 2_000, 3_000] {
            p.ok_latency.record_us(us);
        }
        let mut s = SubscriberStats { delivered: 1800 - 18, ..Default::default() };
        s.delivery_latency.record_us(5_000);
        let r = Results::compute(start, &p, &s, 2);
        assert!((r.send_window_secs - 10.0).abs() < 1e-9);
        assert!((r.ok_window_secs - 10.5).abs() < 1e-9);
        assert!((r.sent_per_sec - 100.0).abs() < 1e-9);
        assert!((r.accepted_per_sec - 900.0 / 10.5).abs() < 1e-9);
        assert_eq!(r.delivery.expected, 1800);
        assert!((r.delivery.ratio.expect("ratio") - 0.99).abs() < 1e-9);
        assert_eq!(r.ok_latency.count, 3);
        assert_eq!(r.rejected_reasons.total(), 1);
    }

    #[test]
    fn nothing_expected_without_subscribers() {
        let p = PublisherStats { accepted: 5, ..Default::default() };
        let r = Results::compute(Instant::now(), &p, &SubscriberStats::default(), 0);
        assert_eq!(r.delivery.expected, 0);
        assert_eq!(r.delivery.ratio, None);
        assert!(r.accepted_per_sec.abs() < f64::EPSILON);
    }

    #[test]
    fn complete_needs_everything_accepted_and_delivered() {
        let start = Instant::now();
        let all = PublisherStats { sent: 5, accepted: 5, ..Default::default() };
        let delivered = SubscriberStats { delivered: 5, ..Default::default() };
        assert_eq!(Results::compute(start, &all, &delivered, 1).check_complete(), Ok(()));
        let lost = SubscriberStats { delivered: 4, ..Default::default() };
        assert!(Results::compute(start, &all, &lost, 1).check_complete().unwrap_err().contains("4 of 5"));
        let refused = PublisherStats { sent: 5, accepted: 3, rejected: 2, ..Default::default() };
        assert!(Results::compute(start, &refused, &delivered, 1).check_complete().is_err());
        let none = PublisherStats::default();
        assert!(Results::compute(start, &none, &SubscriberStats::default(), 1).check_complete().is_err());
    }

    #[test]
    fn millis_format() {
        assert_eq!(ms(0), "0.000");
        assert_eq!(ms(1_234), "1.234");
        assert_eq!(ms(56_007), "56.007");
    }
}
