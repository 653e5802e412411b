//! The loops `sysdiet bench` times: C loops (loops.c, built by build.rs)
//! around one libc call each, and how each is run.

use std::ffi::CStr;

type LoopFn = unsafe extern "C" fn(n: u64, arg: isize);

extern "C" {
    fn sd_none(n: u64, arg: isize);
    fn sd_time(n: u64, arg: isize);
    fn sd_gettimeofday(n: u64, arg: isize);
    fn sd_clock_gettime(n: u64, arg: isize);
    fn sd_localtime(n: u64, arg: isize);
    fn sd_localtime_r(n: u64, arg: isize);
    fn sd_gmtime_r(n: u64, arg: isize);
    fn sd_strftime(n: u64, arg: isize);
    fn sd_mktime(n: u64, arg: isize);
    fn sd_tzset(n: u64, arg: isize);
    fn sd_sigprocmask(n: u64, arg: isize);
    fn sd_pthread_sigmask(n: u64, arg: isize);
    fn sd_getcontext_setcontext(n: u64, arg: isize);
    fn sd_sigsetjmp(n: u64, arg: isize);
    fn sd_setjmp(n: u64, arg: isize);
    fn sd_stat(n: u64, arg: isize);
    fn sd_getpid(n: u64, arg: isize);
}

/// The TZ a loop's process runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tz {
    Unset,
    /// The fix the TZ rule proposes.
    Set,
}

pub const TZ_SET: &str = ":/etc/localtime";

#[derive(Debug, Clone, Copy)]
enum Arg {
    None,
    Int(i32),
    Str(&'static CStr),
}

pub struct BenchLoop {
    /// The function timed: what `--only` names (every variant answers).
    pub name: &'static str,
    /// Which variant, for `--only name:variant`; "" when there is one.
    pub variant: &'static str,
    /// How the table shows it.
    pub label: &'static str,
    pub tz: Tz,
    run: LoopFn,
    arg: Arg,
}

impl BenchLoop {
    /// `name` or `name:variant`.
    pub fn id(&self) -> String {
        if self.variant.is_empty() {
            self.name.to_string()
        } else {
            format!("{}:{}", self.name, self.variant)
        }
    }

    /// Makes the call `n` times.
    pub fn run(&self, n: u64) {
        let arg = match self.arg {
            Arg::None => 0,
            Arg::Int(i) => i as isize,
            Arg::Str(s) => s.as_ptr() as isize,
        };
        // SAFETY: the C loops take any n, and the argument each expects:
        // a clock id, a flag, or a NUL-terminated string that lives forever.
        unsafe { (self.run)(n, arg) }
    }
}

const fn k(name: &'static str, variant: &'static str, label: &'static str, tz: Tz, run: LoopFn, arg: Arg) -> BenchLoop {
    BenchLoop { name, variant, label, tz, run, arg }
}

const fn clock(variant: &'static str, label: &'static str, id: i32) -> BenchLoop {
    k("clock_gettime", variant, label, Tz::Unset, sd_clock_gettime, Arg::Int(id))
}

use Tz::{Set, Unset};

/// Every loop, in the order the table shows them. Every process runs
/// with TZ unset, except where a label says TZ is set.
pub static LOOPS: &[BenchLoop] = &[
    k("none", "", "none (the loop alone)", Unset, sd_none, Arg::None),
    k("time", "", "time", Unset, sd_time, Arg::None),
    k("gettimeofday", "", "gettimeofday", Unset, sd_gettimeofday, Arg::None),
    clock("realtime", "clock_gettime(REALTIME)", libc::CLOCK_REALTIME),
    clock("realtime_coarse", "clock_gettime(REALTIME_COARSE)", libc::CLOCK_REALTIME_COARSE),
    clock("monotonic", "clock_gettime(MONOTONIC)", libc::CLOCK_MONOTONIC),
    clock("monotonic_coarse", "clock_gettime(MONOTONIC_COARSE)", libc::CLOCK_MONOTONIC_COARSE),
    clock("monotonic_raw", "clock_gettime(MONOTONIC_RAW)", libc::CLOCK_MONOTONIC_RAW),
    clock("boottime", "clock_gettime(BOOTTIME)", libc::CLOCK_BOOTTIME),
    clock("process_cputime", "clock_gettime(PROCESS_CPUTIME_ID)", libc::CLOCK_PROCESS_CPUTIME_ID),
    clock("thread_cputime", "clock_gettime(THREAD_CPUTIME_ID)", libc::CLOCK_THREAD_CPUTIME_ID),
    k("localtime", "tz_unset", "localtime (TZ unset)", Unset, sd_localtime, Arg::None),
    k("localtime", "tz_set", "localtime (TZ=:/etc/localtime)", Set, sd_localtime, Arg::None),
    k("localtime_r", "", "localtime_r (TZ unset)", Unset, sd_localtime_r, Arg::None),
    k("gmtime_r", "", "gmtime_r", Unset, sd_gmtime_r, Arg::None),
    // A timestamp with the zone's name: the struct tm carries it, no lookup.
    k("strftime", "zone", "strftime(\"%F %T %Z\") (TZ unset)", Unset, sd_strftime, Arg::Str(c"%F %T %Z")),
    // Seconds since the epoch: a mktime() inside.
    k("strftime", "epoch", "strftime(\"%s\") (TZ unset)", Unset, sd_strftime, Arg::Str(c"%s")),
    k("mktime", "tz_unset", "mktime (TZ unset)", Unset, sd_mktime, Arg::None),
    k("mktime", "tz_set", "mktime (TZ=:/etc/localtime)", Set, sd_mktime, Arg::None),
    k("tzset", "tz_unset", "tzset (TZ unset)", Unset, sd_tzset, Arg::None),
    k("tzset", "tz_set", "tzset (TZ=:/etc/localtime)", Set, sd_tzset, Arg::None),
    k("sigprocmask", "", "sigprocmask", Unset, sd_sigprocmask, Arg::None),
    k("pthread_sigmask", "", "pthread_sigmask", Unset, sd_pthread_sigmask, Arg::None),
    k("getcontext", "", "getcontext+setcontext", Unset, sd_getcontext_setcontext, Arg::None),
    k("sigsetjmp", "mask", "sigsetjmp(env, 1)+siglongjmp", Unset, sd_sigsetjmp, Arg::Int(1)),
    k("sigsetjmp", "no_mask", "sigsetjmp(env, 0)+siglongjmp", Unset, sd_sigsetjmp, Arg::Int(0)),
    k("_setjmp", "", "_setjmp+_longjmp", Unset, sd_setjmp, Arg::None),
    k("stat", "", "stat(\"/etc/localtime\")", Unset, sd_stat, Arg::Str(c"/etc/localtime")),
    k("getpid", "", "getpid", Unset, sd_getpid, Arg::None),
];

/// The loops `only` names (all when None), in table order; an unknown
/// name is an error that lists the known ones.
pub fn select(only: Option<&[String]>) -> Result<Vec<usize>, String> {
    let Some(only) = only else { return Ok((0..LOOPS.len()).collect()) };
    for want in only {
        if !LOOPS.iter().any(|k| k.name == want || k.id() == *want) {
            return Err(format!("unknown loop `{want}` (see `sysdiet bench --list`)"));
        }
    }
    Ok((0..LOOPS.len()).filter(|&i| only.iter().any(|w| LOOPS[i].name == w || LOOPS[i].id() == *w)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique() {
        let mut ids: Vec<String> = LOOPS.iter().map(BenchLoop::id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), LOOPS.len());
    }

    #[test]
    fn a_name_selects_every_variant_and_an_id_one() {
        let names = |sel: Vec<usize>| sel.iter().map(|&i| LOOPS[i].id()).collect::<Vec<_>>();
        assert_eq!(names(select(Some(&["localtime".into(), "none".into()])).unwrap()), ["none", "localtime:tz_unset", "localtime:tz_set"]);
        assert_eq!(names(select(Some(&["localtime:tz_set".into()])).unwrap()), ["localtime:tz_set"]);
        assert!(select(Some(&["localtim".into()])).unwrap_err().contains("localtim"));
        assert_eq!(select(None).unwrap().len(), LOOPS.len());
    }

    #[test]
    fn loops_run() {
        for k in LOOPS {
            k.run(3);
        }
    }
}
