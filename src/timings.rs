//! Where a run's milliseconds go, when `SYSDIET_TIMINGS=1` asks: each
//! step of set-up and read-out records a span (its name, its thread, when
//! it began and how long it took since sysdiet started), and the binary
//! prints them on stderr at the end. Off, a span costs one relaxed load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

static ON: AtomicBool = AtomicBool::new(false);
static START: OnceLock<Instant> = OnceLock::new();
static SPANS: Mutex<Vec<Span>> = Mutex::new(Vec::new());

/// One step, timed.
#[derive(Debug, Clone)]
pub struct Span {
    pub name: &'static str,
    /// The thread it ran on (its name, or "main").
    pub thread: String,
    /// When it began, from sysdiet's start.
    pub begin: Duration,
    pub took: Duration,
}

/// Starts recording when SYSDIET_TIMINGS is set (and not "0"); `start`
/// is when sysdiet started.
pub fn init(start: Instant) {
    let asked = std::env::var_os("SYSDIET_TIMINGS").is_some_and(|v| v != "0" && !v.is_empty());
    if asked {
        let _ = START.set(start);
        ON.store(true, Ordering::Relaxed);
    }
}

/// Whether spans are being recorded.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A step that ends when the guard is dropped.
pub fn span(name: &'static str) -> Guard {
    Guard { name, begin: on().then(Instant::now) }
}

/// Runs `f` as a step.
pub fn timed<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
    let _g = span(name);
    f()
}

/// Records a step that began at `begin` and ends now.
pub fn record(name: &'static str, begin: Instant) {
    let Some(start) = START.get().filter(|_| on()) else { return };
    let thread = std::thread::current().name().unwrap_or("another").to_string();
    let span = Span { name, thread, begin: begin.saturating_duration_since(*start), took: begin.elapsed() };
    if let Ok(mut spans) = SPANS.lock() {
        spans.push(span);
    }
}

pub struct Guard {
    name: &'static str,
    begin: Option<Instant>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(begin) = self.begin {
            record(self.name, begin);
        }
    }
}

/// Every span recorded, in the order they began.
pub fn spans() -> Vec<Span> {
    let mut out = SPANS.lock().map(|s| s.clone()).unwrap_or_default();
    out.sort_by_key(|s| s.begin);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_kept_only_when_asked() {
        // Off: nothing is kept.
        drop(span("off"));
        assert!(spans().iter().all(|s| s.name != "off"));
        let _ = START.set(Instant::now());
        ON.store(true, Ordering::Relaxed);
        {
            let _g = span("step");
            std::thread::sleep(Duration::from_millis(2));
        }
        ON.store(false, Ordering::Relaxed);
        let step = spans().into_iter().find(|s| s.name == "step").expect("the step was kept");
        assert!(step.took >= Duration::from_millis(2), "{step:?}");
    }
}
