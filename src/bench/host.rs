//! The facts a bench's figures depend on: the CPU, the kernel, glibc, the
//! clocksource (which decides whether the clock calls reach the kernel),
//! and TZ.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Host {
    pub cpu: String,
    pub cpus: usize,
    /// `uname -r`, and the machine (x86_64).
    pub kernel: String,
    pub machine: String,
    pub glibc: String,
    pub clocksource: Option<String>,
    /// Whether the vDSO reads that clocksource (clock calls stay out of the kernel).
    pub vdso_clock: bool,
    /// TZ in sysdiet's own environment (the loops run with their own).
    pub tz: Option<String>,
    /// The zone /etc/localtime names.
    pub zone: Option<String>,
}

pub fn facts() -> Host {
    let uts = nix::sys::utsname::uname().ok();
    let field =
        |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| uts.as_ref().map_or_else(String::new, |u| f(u).to_string_lossy().into_owned());
    let clocksource = crate::linux::clocksource();
    Host {
        cpu: cpu_model(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: field(|u| u.release()),
        machine: field(|u| u.machine()),
        glibc: glibc_version(),
        vdso_clock: clocksource.as_deref().is_some_and(crate::linux::vdso_capable),
        clocksource,
        tz: std::env::var("TZ").ok(),
        zone: crate::linux::host::zone(),
    }
}

/// The CPU's name in /proc/cpuinfo: `model name` on x86, other keys on Arm.
fn cpu_model(cpuinfo: &str) -> String {
    ["model name", "Model", "cpu model", "Hardware"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
            })
        })
        .unwrap_or_else(|| "unknown".into())
}

fn glibc_version() -> String {
    // SAFETY: returns a static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_names_from_cpuinfo() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
        assert_eq!(cpu_model(x86), "Intel(R) Xeon(R) CPU @ 2.20GHz");
        assert_eq!(cpu_model("processor : 0\nBogoMIPS : 50.00\nModel : Raspberry Pi 4\n"), "Raspberry Pi 4");
        assert_eq!(cpu_model(""), "unknown");
    }

    #[test]
    fn this_host_has_facts() {
        let h = facts();
        assert!(h.cpus >= 1);
        assert!(h.glibc.starts_with("2."), "{}", h.glibc);
        assert!(!h.kernel.is_empty());
    }
}
