//! The arguments of a call as strace prints them: split at the commas
//! between them, and read the few that sysdiet keys calls by (a path, an
//! fd, a byte count, a clock, a timeout, a signal set).

/// Splits `ARGS` at its top-level commas: not inside strings, `[...]`,
/// `{...}`, `(...)`, or a `-y` fd's `<path>`.
pub fn split(args: &str) -> Vec<&str> {
    let b = args.as_bytes();
    let mut out = Vec::new();
    let (mut depth, mut start, mut i) = (0i32, 0usize, 0usize);
    let mut in_decor = false;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'<' if !in_decor && i > 0 && (b[i - 1].is_ascii_digit() || b[i - 1] == b'D') => in_decor = true,
            b'>' if in_decor => in_decor = false,
            b'[' | b'{' | b'(' if !in_decor => depth += 1,
            b']' | b'}' | b')' if !in_decor => depth -= 1,
            b',' if depth == 0 && !in_decor => {
                out.push(args[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let last = args[start.min(args.len())..].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    out
}

/// A string argument: its bytes, and whether strace cut it (`"..."...`).
/// `None` when the argument is not a string (NULL, an address).
pub fn string(arg: &str) -> Option<(Vec<u8>, bool)> {
    let body = arg.strip_prefix('"')?;
    let b = body.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => return Some((out, body[i + 1..].starts_with("..."))),
            b'\\' if i + 1 < b.len() => {
                i += 1;
                let (byte, used) = escape(&b[i..]);
                out.push(byte);
                i += used;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    None
}

/// One escape after the backslash: the byte, and how many bytes it used.
fn escape(b: &[u8]) -> (u8, usize) {
    match b[0] {
        b'n' => (b'\n', 1),
        b't' => (b'\t', 1),
        b'r' => (b'\r', 1),
        b'v' => (0x0b, 1),
        b'f' => (0x0c, 1),
        b'x' => {
            let hex = b[1..].iter().take(2).take_while(|c| c.is_ascii_hexdigit()).count();
            let v = std::str::from_utf8(&b[1..1 + hex]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()).unwrap_or(b'x');
            (v, 1 + hex)
        }
        b'0'..=b'7' => {
            let n = b.iter().take(3).take_while(|c| (b'0'..=b'7').contains(c)).count();
            let v = b[..n].iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
            (v as u8, n)
        }
        c => (c, 1),
    }
}

/// An fd argument: `3`, `3</etc/passwd>` (-y); `AT_FDCWD` is -100.
pub fn fd(arg: &str) -> Option<i64> {
    if arg.starts_with("AT_FDCWD") {
        return Some(-100);
    }
    number(arg.split('<').next()?)
}

/// A number as strace prints one: decimal or 0x-hex, maybe negative.
pub fn number(arg: &str) -> Option<i64> {
    let arg = arg.trim();
    match arg.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok().map(|v| v as i64),
        None => arg.parse().ok(),
    }
}

/// clock_gettime's first argument by name.
pub fn clock(arg: &str) -> Option<i64> {
    crate::linux::CLOCK_NAMES.iter().position(|c| *c == arg).map(|i| i as i64).or_else(|| number(arg))
}

/// A timeout pointer's class: NULL waits forever, `{tv_sec=0, tv_nsec=0}`
/// (or tv_usec) returns at once. `Some(true)` for zero, `Some(false)` for
/// finite, `None` for no timeout.
pub fn timespec_is_zero(arg: &str) -> Option<bool> {
    if arg == "NULL" {
        return None;
    }
    let fields = arg.strip_prefix('{').and_then(|a| a.strip_suffix('}'));
    let zero = fields.is_some_and(|f| split(f).iter().all(|f| f.ends_with("=0")));
    Some(zero)
}

/// A signal set, `[INT TERM]` or `~[KILL STOP RTMIN RT_1]`, as a 64-bit
/// mask (bit N-1 for signal N). `None` for NULL or an address.
pub fn sigset(arg: &str) -> Option<u64> {
    let (negated, body) = match arg.strip_prefix('~') {
        Some(rest) => (true, rest),
        None => (false, arg),
    };
    let inner = body.strip_prefix('[')?.strip_suffix(']')?;
    let mut mask = 0u64;
    for name in inner.split_whitespace() {
        let n = signal_number(name)?;
        if (1..=64).contains(&n) {
            mask |= 1 << (n - 1);
        }
    }
    Some(if negated { !mask } else { mask })
}

/// `INT` or `SIGINT` → 2; `RTMIN` → 32, `RT_3` → 35; a bare number.
pub fn signal_number(name: &str) -> Option<u32> {
    const NAMES: &[&str] = &[
        "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT",
        "STOP", "TSTP", "TTIN", "TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
    ];
    let name = name.strip_prefix("SIG").unwrap_or(name);
    if let Some(i) = NAMES.iter().position(|n| *n == name) {
        return Some(i as u32 + 1);
    }
    match name {
        "IOT" => return Some(6),
        "POLL" => return Some(29),
        "RTMIN" => return Some(32),
        _ => {}
    }
    if let Some(k) = name.strip_prefix("RT_") {
        return k.parse::<u32>().ok().map(|k| 32 + k);
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_top_level_commas_only() {
        assert_eq!(
            split(r#"AT_FDCWD, "/a,b", {st_mode=S_IFREG|0644, st_size=1, ...}, 0"#),
            vec!["AT_FDCWD", "\"/a,b\"", "{st_mode=S_IFREG|0644, st_size=1, ...}", "0"]
        );
        assert_eq!(split(r#"3</tmp/x,y>, "\",", 5"#), vec!["3</tmp/x,y>", r#""\",""#, "5"]);
        assert_eq!(split(""), Vec::<&str>::new());
        assert_eq!(split("[{fd=3, events=POLLIN}], 1, -1"), vec!["[{fd=3, events=POLLIN}]", "1", "-1"]);
    }

    #[test]
    fn strings_unescape() {
        assert_eq!(string(r#""/etc/localtime""#), Some((b"/etc/localtime".to_vec(), false)));
        assert_eq!(string(r#""a\nb\x41\101\\\"""#), Some((b"a\nbAA\\\"".to_vec(), false)));
        assert_eq!(string(r#""\377\0""#), Some((vec![0xff, 0], false)));
        assert_eq!(string(r#""abc"..."#), Some((b"abc".to_vec(), true)));
        assert_eq!(string("NULL"), None);
        assert_eq!(string("\"unterminated"), None);
    }

    #[test]
    fn numbers_fds_clocks() {
        assert_eq!(fd("3</etc/passwd>"), Some(3));
        assert_eq!(fd("AT_FDCWD</root>"), Some(-100));
        assert_eq!(number("0x10"), Some(16));
        assert_eq!(number("-1"), Some(-1));
        assert_eq!(clock("CLOCK_MONOTONIC"), Some(1));
        assert_eq!(clock("CLOCK_BOOTTIME"), Some(7));
    }

    #[test]
    fn timeouts_and_sigsets() {
        assert_eq!(timespec_is_zero("{tv_sec=0, tv_nsec=0}"), Some(true));
        assert_eq!(timespec_is_zero("{tv_sec=1, tv_nsec=0}"), Some(false));
        assert_eq!(timespec_is_zero("NULL"), None);
        assert_eq!(sigset("[]"), Some(0));
        assert_eq!(sigset("[INT TERM]"), Some((1 << 1) | (1 << 14)));
        assert_eq!(sigset("~[]"), Some(u64::MAX));
        assert_eq!(sigset("[RTMIN RT_1]"), Some((1 << 31) | (1 << 32)));
        assert_eq!(sigset("NULL"), None);
        assert_eq!(sigset("0x7ffe1234"), None);
    }
}
