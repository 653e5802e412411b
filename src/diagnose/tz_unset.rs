//! tz-unset: with `TZ` unset, glibc's localtime(), mktime(), timelocal(),
//! tzset(), ctime() and strftime("%s"...) stat the zone file on every call
//! to see whether it changed; localtime_r(), gmtime() and a plain
//! strftime() check once. Setting TZ makes it check once too.

use super::{called_through, environment_of, prove, Evidence, Finding, Fix, PATH_LOOKUPS};
use crate::human::{quoted, thousands};
use crate::model::{Argument, Trace};

pub const ID: &str = "tz-unset";

/// The glibc functions that re-check the zone file when TZ is unset.
const RECHECKING: &[&str] = &["localtime", "mktime", "timelocal", "tzset", "ctime", "strftime", "asctime"];

/// What to change in the code, by the functions the sites went through:
/// localtime_r() helps only where localtime()-like calls re-check; mktime()
/// re-checks whatever else is called; a program calling tzset() itself
/// before each conversion (as POSIX asks of localtime_r's callers, and
/// perl does) needs it once.
fn code_fixes(via: &[&str]) -> Vec<&'static str> {
    const LOCALTIME_R: &str = "call localtime_r(), which checks the zone file once";
    let any = |names: &[&str]| names.iter().any(|n| via.contains(n));
    let mut fixes = Vec::new();
    if any(&["mktime", "timelocal"]) {
        fixes.push(
            "mktime() checks the zone file on every call, beside localtime_r() too: convert with timegm() and the offset found once, or set TZ",
        );
    }
    if any(&["localtime", "ctime", "asctime", "strftime"]) {
        fixes.push(LOCALTIME_R);
    }
    if fixes.is_empty() && any(&["tzset"]) {
        fixes.push("call tzset() once at start-up, not before each conversion (localtime_r() then needs no more)");
    }
    if fixes.is_empty() {
        fixes.push(LOCALTIME_R);
    }
    fixes
}

pub fn check(trace: &Trace) -> Vec<Finding> {
    // With TZ unset, glibc's zone is /etc/localtime (TZDIR does not apply).
    let zone_file = "/etc/localtime";
    trace
        .arguments
        .iter()
        .filter(|a| PATH_LOOKUPS.contains(&a.syscall.as_str()))
        .filter(|a| matches!(&a.argument, Argument::Path { path: Some(p), .. } if p == zone_file))
        // The process's own TZ at its exec: a wrapper may have unset it.
        .filter(|a| environment_of(trace, Some(a.pid)).tz.is_none())
        // The first call reads the file; only the repeats are waste.
        .filter(|a| a.calls >= 2)
        .map(|a| {
            let via: Vec<&str> = RECHECKING.iter().copied().filter(|f| called_through(trace, &a.sites, &[f])).collect();
            let through = if via.is_empty() {
                "localtime()/mktime()/tzset()/ctime()".to_string()
            } else {
                via.iter().map(|f| format!("{f}()")).collect::<Vec<_>>().join("/")
            };
            let per_call = a.total_ns / a.calls;
            Finding {
                id: ID.into(),
                what: format!("{} × {}({})", thousands(a.calls), a.syscall, quoted(zone_file)),
                pid: Some(a.pid),
                evidence: Evidence::new(trace, &a.syscall, a.calls, a.total_ns),
                sites: a.sites.clone(),
                saving_ns: (a.calls - 1) * per_call,
                why: format!(
                    "TZ is unset, so glibc checks {zone_file} for a change on every {through}; \
                     localtime_r(), gmtime() and strftime() without %s check once"
                ),
                fixes: [
                    Fix::env("start it with TZ=:/etc/localtime"),
                    Fix::config("for a systemd service: Environment=TZ=:/etc/localtime in a drop-in (systemctl edit UNIT)"),
                ]
                .into_iter()
                .chain(code_fixes(&via).into_iter().map(Fix::code))
                .collect(),
                tradeoff: Some("with TZ set, the process no longer notices a change of the system's time zone until it restarts".into()),
                prove: prove(trace, "--env TZ=:/etc/localtime"),
                ..Default::default()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;
    use crate::diagnose::FixKind;

    fn stat_loop(calls: u64) -> Trace {
        let mut t = trace(2_000_000_000, &[("newfstatat", calls, calls * 1200)]);
        let s = site(&mut t, &["__GI___fstatat64", "__tzfile_read", "__tz_convert", "use_localtime"]);
        argument(&mut t, "newfstatat", path("/etc/localtime"), calls, calls * 1200).sites = s;
        t
    }

    #[test]
    fn repeated_zone_file_stats_with_tz_unset() {
        let f = check(&stat_loop(1_000_000));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "1,000,000 × newfstatat(\"/etc/localtime\")");
        assert_eq!(f[0].saving_ns, 999_999 * 1200);
        assert!(f[0].fixes[0].text.contains("TZ=:/etc/localtime"));
        assert_eq!(f[0].prove.as_deref(), Some("sysdiet compare --env TZ=:/etc/localtime -- ./app"));
        assert!(f[0].tradeoff.as_ref().unwrap().contains("until it restarts"));
    }

    #[test]
    fn the_code_fix_follows_the_function_that_rechecks() {
        let fixes = |functions: &[&str]| {
            let mut t = trace(2_000_000_000, &[("newfstatat", 1000, 1_200_000)]);
            let s = site(&mut t, functions);
            argument(&mut t, "newfstatat", path("/etc/localtime"), 1000, 1_200_000).sites = s;
            check(&t)[0].fixes.iter().filter(|f| f.kind == FixKind::Code).map(|f| f.text.clone()).collect::<Vec<_>>().join(" | ")
        };
        // localtime(): localtime_r() is the cure.
        let f = fixes(&["__GI___fstatat64", "__tzfile_read", "tzset_internal", "__tz_convert", "localtime", "use_localtime"]);
        assert!(f.starts_with("call localtime_r()"), "{f}");
        // mktime() re-checks even beside localtime_r(): not that advice.
        let f = fixes(&["__GI___fstatat64", "__tzfile_read", "tzset_internal", "__tzset", "mktime", "to_epoch"]);
        assert!(f.contains("timegm()") && !f.contains("call localtime_r()"), "{f}");
        // perl calls tzset() before each localtime_r().
        let f = fixes(&["fstatat", "__tzfile_read", "tzset_internal", "tzset", "Perl_localtime64_r"]);
        assert!(f.starts_with("call tzset() once"), "{f}");
    }

    #[test]
    fn tz_set_or_a_single_read_is_fine() {
        let mut t = stat_loop(1_000_000);
        t.run.environment.tz = Some(":/etc/localtime".into());
        assert!(check(&t).is_empty());
        assert!(check(&stat_loop(1)).is_empty());
    }

    #[test]
    fn other_paths_are_not_the_zone_file() {
        let mut t = trace(1_000_000, &[("newfstatat", 1000, 1000)]);
        argument(&mut t, "newfstatat", path("/etc/passwd"), 1000, 1000);
        assert!(check(&t).is_empty());
    }
}
