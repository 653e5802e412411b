//! `sysdiet bench --svg`: ns per call as a plot. One thread count: a bar per
//! loop, min…max as a whisker. Several: a line per loop across the
//! thread counts, so contention shows as a rising line. The axis is
//! logarithmic: the loop costs a fraction of a nanosecond, a syscall
//! hundreds.

use std::fmt::Write;

use crate::bench::{LoopCost, Measurements, SyscallsPerCall};
use crate::human::ns;

const WIDTH: f64 = 960.0;
const LABELS: f64 = 300.0; // left margin for loop names (bars)
const ROW: f64 = 22.0;
const TOP: f64 = 64.0;
/// Colours for lines, cycled (Okabe–Ito, readable by the colour-blind).
const PALETTE: &[&str] = &["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#882255"];
const SYSCALL_COLOUR: &str = "#D55E00";
const USER_COLOUR: &str = "#0072B2";

pub fn render(m: &Measurements) -> String {
    let timed: Vec<&LoopCost> = m.loops.iter().filter(|k| !k.times.is_empty()).collect();
    if m.threads.len() > 1 {
        lines(m, &timed)
    } else {
        bars(m, &timed)
    }
}

/// A log10 axis from a power of ten below the smallest value to one above
/// the largest.
struct Axis {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, from: f64, to: f64) -> Axis {
        let (mut min, mut max) = (f64::INFINITY, 0.0f64);
        for v in values.filter(|v| *v > 0.0) {
            min = min.min(v);
            max = max.max(v);
        }
        if !min.is_finite() {
            (min, max) = (1.0, 10.0);
        }
        let lo = min.log10().floor();
        let hi = max.log10().ceil().max(lo + 1.0);
        Axis { lo, hi, from, to }
    }

    fn at(&self, v: f64) -> f64 {
        let l = v.max(10f64.powf(self.lo)).log10();
        self.from + (l - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }

    fn ticks(&self) -> impl Iterator<Item = f64> {
        (self.lo as i32..=self.hi as i32).map(|e| 10f64.powi(e))
    }
}

fn head(out: &mut String, height: f64, m: &Measurements, what: &str) {
    let h = &m.host;
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(out, r#"<text x="12" y="22" font-size="16">{}</text>"#, escape(&format!("sysdiet bench: {what}")));
    let facts = format!(
        "{} ({} CPUs), Linux {}, glibc {}, clocksource {}; median of {} runs",
        h.cpu,
        h.cpus,
        h.kernel,
        h.glibc,
        h.clocksource.as_deref().unwrap_or("unknown"),
        m.runs
    );
    let _ = writeln!(out, r##"<text x="12" y="40" fill="#555">{}</text>"##, escape(&facts));
}

fn bars(m: &Measurements, loops: &[&LoopCost]) -> String {
    let plot_right = WIDTH - 170.0;
    let axis = Axis::new(loops.iter().flat_map(|k| k.times.iter().flat_map(|t| [t.ns_per_call.min, t.ns_per_call.max])), LABELS, plot_right);
    let bottom = TOP + ROW * loops.len() as f64;
    let height = bottom + 60.0;
    let mut out = String::new();
    head(&mut out, height, m, "nanoseconds per call (log scale)");
    grid(&mut out, &axis, TOP - 6.0, bottom);
    for (i, k) in loops.iter().enumerate() {
        let t = &k.times[0];
        let y = TOP + ROW * i as f64;
        let makes_syscalls = k.syscalls.as_ref().is_some_and(|s| s.total >= 0.005);
        let colour = if makes_syscalls { SYSCALL_COLOUR } else { USER_COLOUR };
        let x1 = axis.at(t.ns_per_call.median);
        let _ = writeln!(out, r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#, LABELS - 8.0, y + 14.0, escape(&k.label));
        let _ = writeln!(
            out,
            r#"<rect x="{LABELS}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}"><title>{}</title></rect>"#,
            y + 3.0,
            (x1 - LABELS).max(1.0),
            ROW - 6.0,
            escape(&format!("{}: {} ns per call (min {}, max {})", k.label, ns(t.ns_per_call.median), ns(t.ns_per_call.min), ns(t.ns_per_call.max)))
        );
        let (wmin, wmax) = (axis.at(t.ns_per_call.min), axis.at(t.ns_per_call.max));
        let _ = writeln!(out, r#"<line x1="{wmin:.1}" x2="{wmax:.1}" y1="{:.1}" y2="{:.1}" stroke="black"/>"#, y + ROW / 2.0, y + ROW / 2.0);
        let syscalls =
            k.syscalls.as_ref().map_or("?".to_string(), |s| super::bench::syscalls(&SyscallsPerCall { by_syscall: Vec::new(), ..s.clone() }));
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}">{} ns · {} syscalls/call</text>"#,
            wmax.max(x1) + 6.0,
            y + 14.0,
            ns(t.ns_per_call.median),
            syscalls.trim()
        );
    }
    let _ = writeln!(
        out,
        r#"<rect x="{LABELS}" y="{:.1}" width="10" height="10" fill="{SYSCALL_COLOUR}"/><text x="{:.1}" y="{:.1}">enters the kernel</text>"#,
        height - 22.0,
        LABELS + 14.0,
        height - 13.0
    );
    let _ = writeln!(
        out,
        r#"<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="{USER_COLOUR}"/><text x="{:.1}" y="{:.1}">stays in user space</text>"#,
        LABELS + 140.0,
        height - 22.0,
        LABELS + 154.0,
        height - 13.0
    );
    out.push_str("</svg>\n");
    out
}

/// Vertical grid lines at each power of ten, labelled below.
fn grid(out: &mut String, axis: &Axis, top: f64, bottom: f64) {
    for v in axis.ticks() {
        let x = axis.at(v);
        let _ = writeln!(out, r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top:.1}" y2="{bottom:.1}" stroke="#ddd"/>"##);
        let _ = writeln!(out, r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, bottom + 16.0, tick(v));
    }
}

fn lines(m: &Measurements, loops: &[&LoopCost]) -> String {
    let (left, right, top) = (70.0, WIDTH - 330.0, TOP);
    let plot_height = 420.0;
    let bottom = top + plot_height;
    let height = (bottom + 50.0).max(TOP + ROW * loops.len() as f64 + 20.0);
    // Thread counts sit evenly spaced, in the order given.
    let xs: Vec<f64> = (0..m.threads.len()).map(|i| left + 20.0 + i as f64 * (right - left - 40.0) / (m.threads.len() - 1) as f64).collect();
    let axis = Axis::new(loops.iter().flat_map(|k| k.times.iter().map(|t| t.ns_per_call.median)), bottom, top);
    let mut out = String::new();
    head(&mut out, height, m, "nanoseconds per call by threads calling at once (log scale)");
    for v in axis.ticks() {
        let y = axis.at(v);
        let _ = writeln!(out, r##"<line x1="{left}" x2="{right}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/>"##);
        let _ = writeln!(out, r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#, left - 6.0, y + 4.0, tick(v));
    }
    for (x, t) in xs.iter().zip(&m.threads) {
        let _ = writeln!(out, r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{t}</text>"#, bottom + 18.0);
    }
    let _ = writeln!(out, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">threads</text>"#, (left + right) / 2.0, bottom + 36.0);
    for (i, k) in loops.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let dash = if (i / PALETTE.len()) % 2 == 1 { r#" stroke-dasharray="6 3""# } else { "" };
        let points: Vec<(f64, f64)> = k
            .times
            .iter()
            .filter_map(|t| {
                let at = m.threads.iter().position(|&n| n == t.threads)?;
                Some((xs[at], axis.at(t.ns_per_call.median)))
            })
            .collect();
        let path: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"{dash}><title>{}</title></polyline>"#,
            path.join(" "),
            escape(&k.label)
        );
        for (x, y) in &points {
            let _ = writeln!(out, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"/>"#);
        }
        let ly = TOP + ROW * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="2"{dash}/>"#,
            right + 20.0,
            right + 44.0
        );
        let _ = writeln!(out, r#"<text x="{:.1}" y="{:.1}">{}</text>"#, right + 50.0, ly + 4.0, escape(&k.label));
    }
    out.push_str("</svg>\n");
    out
}

/// A power of ten as an axis label: "0.1 ns", "10 ns", "1,000 ns".
fn tick(v: f64) -> String {
    if v >= 1.0 {
        format!("{} ns", crate::human::thousands(v.round() as u64))
    } else {
        format!("{v} ns")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_spans_powers_of_ten() {
        let a = Axis::new([0.3, 1700.0].into_iter(), 0.0, 500.0);
        assert_eq!((a.lo, a.hi), (-1.0, 4.0));
        assert_eq!(a.at(0.1), 0.0);
        assert_eq!(a.at(10_000.0), 500.0);
        assert_eq!(a.ticks().map(tick).collect::<Vec<_>>(), ["0.1 ns", "1 ns", "10 ns", "100 ns", "1,000 ns", "10,000 ns"]);
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape(r#"strftime "%F" <&>"#), "strftime &quot;%F&quot; &lt;&amp;&gt;");
    }
}
