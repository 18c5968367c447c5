//! Prometheus text (exposition format 0.0.4): a family's header, a sample,
//! a histogram's lines; and the API's own request-latency histograms,
//! counted without a lock.

use crate::core::metrics::Buckets;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes a metric family's `# HELP` and `# TYPE` lines.
pub fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes one sample line.
pub fn sample(out: &mut String, name: &str, labels: &str, value: impl std::fmt::Display) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// Appends the cumulative `_bucket`, `_sum` and `_count` lines of
/// `name{labels}`.
pub fn histogram(out: &mut String, name: &str, labels: &str, b: &Buckets) {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0;
    for (i, c) in b.counts.iter().enumerate() {
        cumulative += c;
        let le = match b.bounds.get(i) {
            Some(b) => format!("{b}"),
            None => "+Inf".into(),
        };
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
        );
    }
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(out, "{name}_sum{braces} {}", b.sum);
    let _ = writeln!(out, "{name}_count{braces} {cumulative}");
}

/// [`Buckets`] counted by many threads at once, with atomics.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    /// Sum of observations, as f64 bits.
    sum: AtomicU64,
}

impl Histogram {
    /// An empty histogram over `bounds` (ascending; `+Inf` is implied).
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// Records one observation.
    pub fn observe(&self, v: f64) {
        self.counts[Buckets::index(self.bounds, v)].fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + v).to_bits())
            });
    }

    /// The counts so far.
    pub fn snapshot(&self) -> Buckets {
        Buckets {
            bounds: self.bounds,
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: f64::from_bits(self.sum.load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buckets are cumulative and the count and sum match the observations.
    #[test]
    fn histogram_renders_cumulative_buckets() {
        let h = Histogram::new(&[1.0, 10.0]);
        for v in [0.5, 1.0, 3.0, 30.0] {
            h.observe(v);
        }
        let mut s = String::new();
        histogram(&mut s, "x", "a=\"b\"", &h.snapshot());
        assert_eq!(
            s,
            "x_bucket{a=\"b\",le=\"1\"} 2\nx_bucket{a=\"b\",le=\"10\"} 3\n\
             x_bucket{a=\"b\",le=\"+Inf\"} 4\nx_sum{a=\"b\"} 34.5\nx_count{a=\"b\"} 4\n"
        );
    }
}
