//! Numbers, durations, sizes and names as people read them. The rules
//! write their one-line findings with these and the renderers their tables,
//! so that a count looks the same everywhere.

/// 1234567 -> "1,234,567"
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration for people: "1.984 s", "12.3 ms", "850 µs", "420 ns".
pub fn duration(ns: u64) -> String {
    let ns_f = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{:.3} s", ns_f / 1e9)
    } else if ns >= 10_000_000 {
        format!("{:.0} ms", ns_f / 1e6)
    } else if ns >= 1_000_000 {
        format!("{:.1} ms", ns_f / 1e6)
    } else if ns >= 1_000 {
        format!("{:.0} µs", ns_f / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// Seconds, as compare shows them: "1.234 s", "56.7 ms".
pub fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

/// Nanoseconds with three significant digits: 0.312, 21.4, 412, 1,712.
pub fn ns(v: f64) -> String {
    match v {
        v if v >= 999.5 => thousands(v.round() as u64),
        v if v >= 99.95 => format!("{v:.0}"),
        v if v >= 9.995 => format!("{v:.1}"),
        v if v >= 0.9995 => format!("{v:.2}"),
        v => format!("{v:.3}"),
    }
}

/// A byte count: "1 byte", "16 bytes", "4 KiB", "1 MiB".
pub fn bytes(n: u64) -> String {
    match n {
        1 => "1 byte".into(),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// `"..."` with control characters and quotes escaped, as strace shows strings.
pub fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `"..."` of bytes that need not be UTF-8: what is UTF-8 as `quoted`
/// shows it, each other byte as `\xNN`, as strace shows them.
pub fn quoted_bytes(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        let q = quoted(chunk.valid());
        out.push_str(&q[1..q.len() - 1]);
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

/// A name from the traced system with its control characters escaped, as
/// `quoted` does, without the quotes.
pub fn escaped(s: &str) -> String {
    let q = quoted(s);
    q[1..q.len() - 1].to_string()
}

/// CLOCK_MONOTONIC, or the number for one without a name (a CPU clock of
/// another process or thread is negative).
pub fn clock_name(id: i64) -> String {
    match usize::try_from(id).ok().filter(|&i| i != 10).and_then(|i| crate::linux::CLOCK_NAMES.get(i)) {
        Some(n) => n.to_string(),
        None if id < 0 => format!("CPU clock {id}"),
        None => format!("clock {id}"),
    }
}

pub fn timeout(t: crate::model::Timeout) -> &'static str {
    use crate::model::Timeout::*;
    match t {
        Zero => "0",
        Finite => "> 0",
        None => "none",
        Unreadable => "unreadable",
        RanOut => "0 or ran out",
    }
}

pub fn mask_change(c: crate::model::MaskChange) -> &'static str {
    use crate::model::MaskChange::*;
    match c {
        Query => "query only",
        Same => "sets the mask it has",
        Block => "block",
        Unblock => "unblock",
        Set => "set",
        Undo => "undoes the previous change",
    }
}

pub fn brk_change(c: crate::model::BrkChange) -> &'static str {
    use crate::model::BrkChange::*;
    match c {
        Query => "query only",
        Grow => "grows the heap",
        Shrink => "shrinks the heap",
        Same => "no move",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_004), "1,000,004");
        assert_eq!(duration(1_984_000_000), "1.984 s");
        assert_eq!(duration(12_300_000), "12 ms");
        assert_eq!(duration(1_230_000), "1.2 ms");
        assert_eq!(duration(850_000), "850 µs");
        assert_eq!(duration(420), "420 ns");
        assert_eq!(bytes(1), "1 byte");
        assert_eq!(bytes(16), "16 bytes");
        assert_eq!(bytes(4096), "4 KiB");
        assert_eq!(quoted("a\"b\n"), "\"a\\\"b\\n\"");
        assert_eq!(quoted_bytes(b"/tmp/caf\xe9\n"), r#""/tmp/caf\xe9\n""#);
        assert_eq!(seconds(1.2345), "1.234 s");
        assert_eq!(seconds(0.0567), "56.7 ms");
        assert_eq!(ns(0.3124), "0.312");
        assert_eq!(ns(1.917), "1.92");
        assert_eq!(ns(21.44), "21.4");
        assert_eq!(ns(412.4), "412");
        assert_eq!(ns(1712.2), "1,712");
    }
}
