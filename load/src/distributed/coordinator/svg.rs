//! The plot of a run, drawn by hand as SVG: headline latency percentiles (p50/p90/p99, ms) per
//! second on top, completed operations per second below.

use std::fmt::Write as _;

use crate::distributed::coordinator::summary::Point;

const W: f64 = 800.0;
const PANEL_H: f64 = 220.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;

/// A "nice" axis maximum at or above `v` (1, 2 or 5 × a power of ten).
#[must_use]
pub fn nice_max(v: f64) -> f64 {
    if !v.is_finite() || v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&x| x >= v).unwrap_or(10.0 * p)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Where a panel plots: its top, its size, and the maxima of its axes.
struct Area {
    y0: f64,
    plot_w: f64,
    plot_h: f64,
    x_max: f64,
    y_max: f64,
}

/// One panel: axes, grid, a polyline per series; `top` is its y offset.
fn panel(out: &mut String, top: f64, title: &str, unit: &str, xs: &[f64], series: &[(&str, &str, Vec<f64>)]) {
    let area = Area {
        y0: top + 30.0,
        plot_w: W - LEFT - RIGHT,
        plot_h: PANEL_H - 50.0,
        x_max: nice_max(xs.iter().copied().fold(1.0, f64::max)),
        y_max: nice_max(series.iter().flat_map(|s| s.2.iter().copied()).fold(0.0, f64::max)),
    };
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        top + 18.0,
        esc(title)
    );
    axes(out, &area, unit);
    for (i, (name, color, ys)) in series.iter().enumerate() {
        let pts: Vec<String> = xs
            .iter()
            .zip(ys)
            .map(|(x, y)| {
                let (px, py) = (
                    LEFT + area.plot_w * x / area.x_max,
                    area.y0 + area.plot_h - area.plot_h * y / area.y_max,
                );
                format!("{px:.1},{py:.1}")
            })
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        #[allow(clippy::cast_precision_loss)] // a handful of series
        let lx = LEFT + 10.0 + 90.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{lx:.1}" y="{:.1}" width="10" height="10" fill="{color}"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
            area.y0 + 6.0,
            lx + 14.0,
            area.y0 + 15.0,
            esc(name)
        );
    }
}

/// A panel's grid, axis labels (`unit` on y, seconds on x) and frame.
fn axes(out: &mut String, a: &Area, unit: &str) {
    let (y0, plot_w, plot_h) = (a.y0, a.plot_w, a.plot_h);
    for k in 0..=4 {
        let v = a.y_max * f64::from(k) / 4.0;
        let y = y0 + plot_h - plot_h * f64::from(k) / 4.0;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{} {}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            trim(v),
            unit
        );
    }
    for k in 0..=5 {
        let v = a.x_max * f64::from(k) / 5.0;
        let x = LEFT + plot_w * f64::from(k) / 5.0;
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{} s</text>"#,
            y0 + plot_h + 16.0,
            trim(v)
        );
    }
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{y0}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>"##
    );
}

fn trim(v: f64) -> String {
    if v >= 100.0 || v == v.floor() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}").trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// The SVG document for `points`, titled with the scenario and headline operation.
#[must_use]
pub fn render(title: &str, headline: &str, points: &[Point]) -> String {
    #[allow(clippy::cast_precision_loss)] // seconds and counts far below 2^52
    let xs: Vec<f64> = points.iter().map(|p| p.second as f64 + 0.5).collect();
    let ms = |f: fn(&Point) -> u64| -> Vec<f64> {
        #[allow(clippy::cast_precision_loss)]
        points.iter().map(|p| f(p) as f64 / 1000.0).collect()
    };
    #[allow(clippy::cast_precision_loss)]
    let ops: Vec<f64> = points.iter().map(|p| p.ops as f64).collect();
    #[allow(clippy::cast_precision_loss)]
    let errs: Vec<f64> = points.iter().map(|p| p.errors as f64).collect();
    let h = PANEL_H * 2.0 + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="{W}" height="{h}" fill="white"/>"#);
    let _ = writeln!(out, r#"<text x="{LEFT}" y="22" font-size="16">{}</text>"#, esc(title));
    panel(
        &mut out,
        30.0,
        &format!("{headline} latency per second"),
        "ms",
        &xs,
        &[
            ("p50", "#1f77b4", ms(|p| p.p50_us)),
            ("p90", "#ff7f0e", ms(|p| p.p90_us)),
            ("p99", "#d62728", ms(|p| p.p99_us)),
        ],
    );
    panel(
        &mut out,
        30.0 + PANEL_H,
        "completed operations per second",
        "/s",
        &xs,
        &[("ops/s", "#2ca02c", ops), ("errors/s", "#7f7f7f", errs)],
    );
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(second: u64, ops: u64, p99_us: u64) -> Point {
        Point { second, ops, errors: 0, p50_us: p99_us / 4, p90_us: p99_us / 2, p99_us }
    }

    #[test]
    fn axis_maxima_are_round() {
        assert!((nice_max(0.0) - 1.0).abs() < 1e-9);
        assert!((nice_max(3.2) - 5.0).abs() < 1e-9);
        assert!((nice_max(12.0) - 20.0).abs() < 1e-9);
        assert!((nice_max(100.0) - 100.0).abs() < 1e-9);
        assert!((nice_max(0.07) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn the_plot_has_two_panels_and_five_series() {
        let pts: Vec<Point> = (0..10).map(|s| point(s, 100 + s, 5_000 + s * 100)).collect();
        let svg = render("chat <2 gateways>", "chat", &pts);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 5);
        assert!(svg.contains("chat &lt;2 gateways&gt;"));
        assert!(svg.contains("chat latency per second"));
        assert!(svg.contains("completed operations per second"));
        // Every polyline has one point per second.
        let first = svg.split("points=\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or("");
        assert_eq!(first.split(' ').count(), 10);
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn an_empty_run_still_draws() {
        let svg = render("empty", "chat", &[]);
        assert!(svg.contains("</svg>") && !svg.contains("NaN"));
    }
}
