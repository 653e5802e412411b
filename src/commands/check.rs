//! `sysdiet check`: a host audit that runs nothing. The clocksource, TZ
//! system-wide, the processes without TZ, and with --sample how often each
//! of them stats the zone file.

use std::time::Duration;

use sysdiet::diagnose::host::audit;
use sysdiet::linux::{self, host};
use sysdiet::report::{Document, Outputs};
use sysdiet::Result;

pub fn check(sample: Option<Duration>, mut outputs: Outputs) -> Result<i32> {
    let (processes, unreadable) = host::processes(std::process::id());
    let counts = match sample {
        Some(d) => Some(sysdiet::pipeline::zone_lookups(&processes, d)?),
        None => None,
    };
    let count_of = |pid: u32| counts.as_ref().and_then(|(_, by_pid)| by_pid.get(&pid).copied()).unwrap_or(0);
    let result = audit(
        linux::clocksource(),
        linux::available_clocksources(),
        host::system_tz(),
        host::zone(),
        &processes,
        unreadable,
        counts.as_ref().map(|(ns, _)| (*ns, &count_of as &dyn Fn(u32) -> u64)),
    );
    outputs.write(&Document::Check(&result))?;
    Ok(0)
}
