//! One line of strace's output, taken apart: the pid prefix (`PID ` with
//! `-o`, `[pid N] ` on stderr), the timestamp (`-t`, `-tt`, `-ttt`, `-r`),
//! and what the line is: a whole call, the first or last half of one
//! (`<unfinished ...>`, `<... NAME resumed>`), a signal, an exit, a stack
//! frame (`-k`) or a message of strace's own.

/// What a line says.
#[derive(Debug, Clone, PartialEq)]
pub enum Body<'a> {
    /// `NAME(ARGS) = RET`: a call, start to end.
    Call { name: &'a str, args: &'a str, ret: Return<'a> },
    /// `NAME(ARGS <unfinished ...>`
    Unfinished { name: &'a str, args: &'a str },
    /// `<... NAME resumed>REST) = RET`
    Resumed { name: &'a str, args: &'a str, ret: Return<'a> },
    /// `--- SIGCHLD {...} ---`
    Signal,
    /// `+++ exited with N +++`
    Exited { code: i32 },
    /// `+++ killed by SIGKILL (core dumped) +++`
    Killed { signal: &'a str, core_dumped: bool },
    /// ` > /lib/libc.so.6(fstatat+0xa) [0xf786a]`: a frame of the stack
    /// of the call above (`-k`).
    Frame(RawFrame<'a>),
    /// `strace: Process 1234 attached`, `[ Process PID=... ]`, `+++ superseded ... +++`
    Message(&'a str),
}

/// A `-k` stack frame as strace prints it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawFrame<'a> {
    /// The ELF file, or strace's error text (`backtracing_error`).
    pub module: &'a str,
    pub symbol: Option<&'a str>,
    /// How far into the symbol the address is (`+0xOFF`).
    pub symbol_offset: u64,
    /// The offset in the file (strace's "true offset").
    pub offset: u64,
    /// `-kk`: the source file and line.
    pub source: Option<(&'a str, u32)>,
}

/// How a call returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Return<'a> {
    /// `None` for `?` (the call did not return: exit, execve's old image).
    pub value: Option<i64>,
    /// The errno name of a failed call (`ENOENT`, `ERESTARTSYS`, `E512`).
    pub errno: Option<&'a str>,
    /// `-T`: the call's time, entry to exit.
    pub duration_ns: Option<u64>,
}

/// A parsed line: whose, when, what.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    pub pid: Option<u32>,
    /// Seconds: of the day (`-t`, `-tt`), since the epoch (`-ttt`) or since
    /// the previous line (`-r`).
    pub time: Option<Stamp>,
    pub body: Body<'a>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stamp {
    /// Seconds since midnight (`-t`, `-tt`).
    OfDay(f64),
    /// Seconds since the epoch (`-ttt`).
    Epoch(f64),
    /// Seconds since the previous line (`-r`).
    Relative(f64),
}

/// Parses one line (without its newline). `None`: not strace's.
pub fn parse(line: &str) -> Option<Line<'_>> {
    let (pid, rest) = pid_prefix(line);
    if let Some(frame) = rest.strip_prefix(" > ") {
        return Some(Line { pid, time: None, body: Body::Frame(frame_of(frame)?) });
    }
    let (time, rest) = timestamp(rest.trim_start());
    let rest = instruction_pointer(rest);
    let body = body(rest)?;
    Some(Line { pid, time, body })
}

/// `1234 ` (`-o` with `-f`; left-aligned, padded) or `[pid  1234] `.
fn pid_prefix(line: &str) -> (Option<u32>, &str) {
    if let Some(rest) = line.strip_prefix("[pid ") {
        if let Some(end) = rest.find("] ") {
            if let Ok(pid) = rest[..end].trim_start().parse() {
                return (Some(pid), &rest[end + 2..]);
            }
        }
        return (None, line);
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && line.as_bytes().get(digits) == Some(&b' ') {
        // `-ttt` without -f: digits then a dot, not a space; a pid is
        // followed by spaces and the rest.
        if let Ok(pid) = line[..digits].parse() {
            return (Some(pid), line[digits..].trim_start_matches(' '));
        }
    }
    (None, line)
}

/// `20:22:18`, `20:22:18.712867`, `1700000000.712867` or (-r) `0.000123`,
/// followed by a space.
fn timestamp(s: &str) -> (Option<Stamp>, &str) {
    let Some(end) = s.find(' ') else { return (None, s) };
    let token = &s[..end];
    let rest = &s[end + 1..];
    let b = token.as_bytes();
    if b.len() >= 8 && b[2] == b':' && b[5] == b':' {
        let hms: Vec<&str> = token.splitn(3, ':').collect();
        if let [h, m, sec] = hms[..] {
            if let (Ok(h), Ok(m), Ok(sec)) = (h.parse::<u32>(), m.parse::<u32>(), sec.parse::<f64>()) {
                return (Some(Stamp::OfDay(f64::from(h) * 3600.0 + f64::from(m) * 60.0 + sec)), rest);
            }
        }
        return (None, s);
    }
    let is_number = !b.is_empty() && b[0].is_ascii_digit() && b.iter().all(|c| c.is_ascii_digit() || *c == b'.') && b.contains(&b'.');
    if is_number {
        if let Ok(v) = token.parse::<f64>() {
            // -r counts from the previous line: small; -ttt from 1970.
            let stamp = if v > 1e8 { Stamp::Epoch(v) } else { Stamp::Relative(v) };
            return (Some(stamp), rest);
        }
    }
    (None, s)
}

/// `-i`: `[00007f2bc6620000] ` before the call.
fn instruction_pointer(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix('[') {
        if let Some(end) = rest.find("] ") {
            if rest[..end].bytes().all(|c| c.is_ascii_hexdigit() || c == b'?') {
                return &rest[end + 2..];
            }
        }
    }
    s
}

fn body(s: &str) -> Option<Body<'_>> {
    if let Some(rest) = s.strip_prefix("+++ ") {
        let inner = rest.strip_suffix(" +++")?;
        if let Some(code) = inner.strip_prefix("exited with ") {
            return Some(Body::Exited { code: code.trim().parse().ok()? });
        }
        if let Some(sig) = inner.strip_prefix("killed by ") {
            let core_dumped = sig.ends_with(" (core dumped)");
            let signal = sig.trim_end_matches(" (core dumped)");
            return Some(Body::Killed { signal, core_dumped });
        }
        return Some(Body::Message(inner));
    }
    if s.starts_with("--- ") && s.ends_with(" ---") {
        return Some(Body::Signal);
    }
    if s.starts_with("strace: ") || (s.starts_with("[ ") && s.ends_with(" ]")) {
        return Some(Body::Message(s));
    }
    if let Some(rest) = s.strip_prefix("<... ") {
        let end = rest.find(" resumed>")?;
        let name = &rest[..end];
        if !is_name(name) {
            return None;
        }
        let tail = rest[end + " resumed>".len()..].trim_start();
        let (args, ret) = split_return(tail)?;
        return Some(Body::Resumed { name, args, ret });
    }
    let open = s.find('(')?;
    let name = &s[..open];
    if !is_name(name) {
        return None;
    }
    let tail = &s[open + 1..];
    if let Some(args) = tail.strip_suffix("<unfinished ...>") {
        return Some(Body::Unfinished { name, args: args.trim_end() });
    }
    let (args, ret) = split_return(tail)?;
    Some(Body::Call { name, args, ret })
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') || s == "????"
}

/// Splits `ARGS) = RET...` at the `) = ` (maybe `)   = `) that ends the arguments: the
/// rightmost one whose tail reads as a return value, since the arguments
/// may hold `) = ` themselves (in strings, in -y paths).
fn split_return(s: &str) -> Option<(&str, Return<'_>)> {
    let (s, duration_ns) = duration(s);
    let mut end = s.len();
    // strace pads short calls with spaces up to column 40: `getpid()   = 7`.
    while let Some(at) = s[..end].rfind(" = ") {
        let args = s[..at].trim_end_matches(' ');
        if let Some(args) = args.strip_suffix(')') {
            if let Some(ret) = return_value(&s[at + 3..]) {
                return Some((args, Return { duration_ns, ..ret }));
            }
        }
        end = at;
    }
    None
}

/// `-T`: a trailing ` <0.000139>`.
fn duration(s: &str) -> (&str, Option<u64>) {
    if let Some(body) = s.strip_suffix('>') {
        if let Some(at) = body.rfind(" <") {
            let t = &body[at + 2..];
            if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
                if let Ok(secs) = t.parse::<f64>() {
                    return (&s[..at], Some((secs * 1e9).round() as u64));
                }
            }
        }
    }
    (s, None)
}

/// `0`, `-1 ENOENT (No such file or directory)`, `0x5570f49bf000`, `?`,
/// `3</etc/ld.so.cache>` (-y), `0 (Timeout)`, `? ERESTARTSYS (...)`,
/// `-1 (errno 512)`, `? <unavailable>`.
fn return_value(s: &str) -> Option<Return<'_>> {
    let token_end = s.find([' ', '<']).unwrap_or(s.len());
    let (token, mut rest) = s.split_at(token_end);
    let value = match token {
        "?" => None,
        t if t.starts_with("0x") => Some(u64::from_str_radix(&t[2..], 16).ok()? as i64),
        t => Some(t.parse::<i64>().ok()?),
    };
    // -y: the returned fd's path, `<...>` (strace escapes `<` and `>` in it).
    if let Some(decor) = rest.strip_prefix('<') {
        let close = decor.find('>')?;
        rest = &decor[close + 1..];
    }
    let mut errno = None;
    if let Some(r) = rest.strip_prefix(' ') {
        let word_end = r.find(' ').unwrap_or(r.len());
        let word = &r[..word_end];
        if word.len() > 1 && word.starts_with('E') && word.bytes().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_') {
            errno = Some(word);
            rest = &r[word_end..];
        } else if let Some(n) = r.strip_prefix("(errno ").and_then(|x| x.strip_suffix(')')) {
            n.parse::<u32>().ok()?;
            errno = Some(n);
            rest = "";
        } else {
            rest = r.strip_prefix("<unavailable>").unwrap_or(rest);
        }
    }
    // What is left is a comment in parentheses, or nothing.
    let rest = rest.trim_start();
    if !(rest.is_empty() || (rest.starts_with('(') && rest.ends_with(')'))) {
        return None;
    }
    Some(Return { value, errno, duration_ns: None })
}

/// `/lib/libc.so.6(fstatat+0xa) [0xf786a]`, `./a.out() [0x40063d]`,
/// `backtracing_error [0x7f..]`, `unexpected_backtracing_error`.
fn frame_of(s: &str) -> Option<RawFrame<'_>> {
    let s = s.trim_end();
    // -kk adds the source after the address: `[0x1204] timeloop.c:9`.
    let (head, offset, source) = match s.rfind(" [0x") {
        Some(at) => {
            let close = at + s[at..].find(']')?;
            let offset = u64::from_str_radix(&s[at + 4..close], 16).ok()?;
            (&s[..at], offset, source_of(s[close + 1..].trim()))
        }
        None => (s, 0, None),
    };
    if let Some(inner) = head.strip_suffix(')') {
        if let Some(open) = inner.rfind('(') {
            let module = &inner[..open];
            let sym = &inner[open + 1..];
            // `sym+0xOFF`: the name, and the offset into it.
            let (symbol, symbol_offset) = match sym.rfind("+0x") {
                Some(plus) => (Some(&sym[..plus]), u64::from_str_radix(&sym[plus + 3..], 16).unwrap_or(0)),
                None if sym.is_empty() => (None, 0),
                None => (Some(sym), 0),
            };
            return Some(RawFrame { module, symbol: symbol.filter(|s| !s.is_empty()), symbol_offset, offset, source });
        }
    }
    Some(RawFrame { module: head, symbol: None, symbol_offset: 0, offset, source })
}

/// `file.c:12` (or `(file.c:12)`) after a frame; None for `??:0` or nothing.
fn source_of(s: &str) -> Option<(&str, u32)> {
    let s = s.trim_start_matches('(').trim_end_matches(')');
    let (file, line) = s.rsplit_once(':')?;
    let line: u32 = line.parse().ok()?;
    (line > 0 && !file.is_empty() && !file.starts_with('?')).then_some((file, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(line: &str) -> (Option<u32>, String, String, Return<'_>) {
        match parse(line).unwrap() {
            Line { pid, body: Body::Call { name, args, ret }, .. } => (pid, name.into(), args.into(), ret),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn whole_calls_with_every_prefix() {
        let (pid, name, args, ret) =
            call(r#"12022 20:22:18.742216 newfstatat(AT_FDCWD, "/etc/localtime", {st_mode=S_IFREG|0644, st_size=114, ...}, 0) = 0 <0.000019>"#);
        assert_eq!((pid, name.as_str()), (Some(12022), "newfstatat"));
        assert!(args.ends_with("}, 0"));
        assert_eq!(ret, Return { value: Some(0), errno: None, duration_ns: Some(19_000) });
        let (pid, _, _, ret) = call("[pid  4242] 1700000000.123456 close(3) = -1 EBADF (Bad file descriptor)");
        assert_eq!((pid, ret.value, ret.errno), (Some(4242), Some(-1), Some("EBADF")));
        let (pid, name, _, ret) = call("getpid()                                = 77");
        assert_eq!((pid, name.as_str(), ret.value), (None, "getpid", Some(77)));
        let (_, _, _, ret) = call("brk(NULL) = 0x5570f49bf000");
        assert_eq!(ret.value, Some(0x5570f49bf000));
        let (_, _, _, ret) = call("exit_group(0) = ?");
        assert_eq!(ret.value, None);
        let (_, _, _, ret) = call("openat(AT_FDCWD</tmp>, \"a\", O_RDONLY) = 3</tmp/a b>");
        assert_eq!(ret.value, Some(3));
        let (_, _, _, ret) = call("poll([{fd=3, events=POLLIN}], 1, 0) = 0 (Timeout)");
        assert_eq!(ret.value, Some(0));
        let (_, _, _, ret) = call("futex(0x1, FUTEX_WAIT, 0, NULL) = ? ERESTARTSYS (To be restarted if SA_RESTART is set) <0.5>");
        assert_eq!((ret.value, ret.errno), (None, Some("ERESTARTSYS")));
        let (_, _, _, ret) = call("foo(1) = -1 (errno 600)");
        assert_eq!(ret.errno, Some("600"));
        let (_, _, _, ret) = call("     0.000123 getppid() = 1");
        assert_eq!(ret.value, Some(1));
    }

    #[test]
    fn the_return_is_found_from_the_end() {
        let (_, _, args, ret) = call(r#"write(1, "x) = 5 (y)\n", 10) = 10"#);
        assert_eq!(args, r#"1, "x) = 5 (y)\n", 10"#);
        assert_eq!(ret.value, Some(10));
    }

    #[test]
    fn halves_of_calls() {
        let l = parse("12023 20:22:18.746669 rseq(0x7f2bc6431fe0, 0x20, 0, 0x53053053 <unfinished ...>").unwrap();
        assert_eq!(l.body, Body::Unfinished { name: "rseq", args: "0x7f2bc6431fe0, 0x20, 0, 0x53053053" });
        let l = parse("12022 20:22:18.747042 <... rt_sigprocmask resumed>NULL, 8) = 0 <0.000352>").unwrap();
        match l.body {
            Body::Resumed { name, args, ret } => {
                assert_eq!((name, args, ret.value, ret.duration_ns), ("rt_sigprocmask", "NULL, 8", Some(0), Some(352_000)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn exits_signals_messages() {
        assert_eq!(parse("12023 +++ exited with 3 +++").unwrap().body, Body::Exited { code: 3 });
        assert_eq!(parse("+++ killed by SIGSEGV (core dumped) +++").unwrap().body, Body::Killed { signal: "SIGSEGV", core_dumped: true });
        assert_eq!(parse("[pid 7] --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED} ---").unwrap().body, Body::Signal);
        assert!(matches!(parse("strace: Process 1234 attached").unwrap().body, Body::Message(_)));
    }

    #[test]
    fn stack_frames() {
        let f = |s| match parse(s).unwrap().body {
            Body::Frame(f) => f,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            f(" > /usr/lib/x86_64-linux-gnu/libc.so.6(fstatat+0xa) [0xf786a]"),
            RawFrame { module: "/usr/lib/x86_64-linux-gnu/libc.so.6", symbol: Some("fstatat"), symbol_offset: 0xa, offset: 0xf786a, source: None }
        );
        assert_eq!(
            f(" > /tmp/a.out() [0x40063d]"),
            RawFrame { module: "/tmp/a.out", symbol: None, symbol_offset: 0, offset: 0x40063d, source: None }
        );
        assert_eq!(f(" > backtracing_error [0x7f00]").module, "backtracing_error");
        let kk = f(" > /tmp/timeloop(use_localtime+0x1a) [0x1204] /src/timeloop.c:9");
        assert_eq!((kk.symbol, kk.offset, kk.source), (Some("use_localtime"), 0x1204, Some(("/src/timeloop.c", 9))));
    }

    #[test]
    fn not_strace() {
        for s in ["hello world", "", "% time     seconds  usecs/call     calls    errors syscall", "open(\"x\") = banana"] {
            assert!(parse(s).is_none(), "{s}");
        }
    }
}
