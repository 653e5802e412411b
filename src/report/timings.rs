//! SYSDIET_TIMINGS' table: each step of a run, when it began and how long
//! it took, on which thread (steps on other threads overlap the main one's).

use std::fmt::Write;
use std::time::Duration;

use crate::timings::Span;

pub fn render(spans: &[Span], total: Duration) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut out = format!("sysdiet: where {:.1} ms went (from sysdiet's start; other threads' steps overlap)\n", ms(total));
    let _ = writeln!(out, "  {:>8}  {:>8}  {:<18} step", "at ms", "took ms", "thread");
    for s in spans {
        let _ = writeln!(out, "  {:>8.1}  {:>8.1}  {:<18} {}", ms(s.begin), ms(s.took), crate::human::escaped(&s.thread), s.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_on_a_line_of_its_own() {
        let span = |name, thread: &str, begin, took| Span {
            name,
            thread: thread.into(),
            begin: Duration::from_micros(begin),
            took: Duration::from_micros(took),
        };
        let text = render(&[span("load and verify", "main", 2_000, 9_500), span("make the big maps", "?", 2_100, 6_000)], Duration::from_millis(30));
        assert_eq!(
            text,
            "sysdiet: where 30.0 ms went (from sysdiet's start; other threads' steps overlap)\n     at ms   took ms  thread             step\n       2.0       9.5  main               load and verify\n       2.1       6.0  ?                  make the big maps\n"
        );
    }
}
