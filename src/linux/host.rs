//! Facts about the host and its running processes, for `sysdiet check`:
//! where TZ is set system-wide, and each process's TZ and service unit.

use std::fs;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunningProcess {
    pub pid: u32,
    pub comm: String,
    /// `TZ` in its environment, None when unset.
    pub tz: Option<String>,
    /// The systemd unit it runs in (`nginx.service`), if any.
    pub unit: Option<String>,
}

/// Every user-space process but `except` (kernel threads have no
/// environment), and how many could not be read (their environment is
/// private to their owner and root); processes that vanish are left out.
pub fn processes(except: u32) -> (Vec<RunningProcess>, usize) {
    let Ok(dir) = fs::read_dir("/proc") else { return (Vec::new(), 0) };
    let mut unreadable = 0;
    let mut out: Vec<RunningProcess> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != except)
        .filter_map(|pid| {
            let environ = match fs::read(format!("/proc/{pid}/environ")) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    unreadable += 1;
                    return None;
                }
                Err(_) => return None,
            };
            if environ.is_empty() {
                return None;
            }
            let tz = environ.split(|&b| b == 0).find_map(|kv| kv.strip_prefix(b"TZ=")).map(|v| String::from_utf8_lossy(v).into_owned());
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?.trim().to_string();
            let unit = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok().and_then(|c| unit_of(&c));
            Some(RunningProcess { pid, comm, tz, unit })
        })
        .collect();
    out.sort_by_key(|p| p.pid);
    (out, unreadable)
}

/// The service unit in a /proc/PID/cgroup text (`0::/system.slice/x.service`).
fn unit_of(cgroup: &str) -> Option<String> {
    cgroup.lines().flat_map(|l| l.rsplit(':').next().unwrap_or("").split('/')).rfind(|p| p.ends_with(".service")).map(str::to_string)
}

/// Where TZ is set for every process the system starts, if anywhere:
/// (file, value).
pub fn system_tz() -> Option<(String, String)> {
    let env = fs::read_to_string("/etc/environment").unwrap_or_default();
    if let Some(v) = env.lines().find_map(|l| l.trim().strip_prefix("TZ=")) {
        return Some(("/etc/environment".into(), v.trim_matches('"').to_string()));
    }
    let conf = fs::read_to_string("/etc/systemd/system.conf").unwrap_or_default();
    conf.lines()
        .filter(|l| l.trim_start().starts_with("DefaultEnvironment="))
        .flat_map(|l| l.split_whitespace())
        .find_map(|w| w.trim_start_matches("DefaultEnvironment=").trim_matches('"').strip_prefix("TZ=").map(str::to_string))
        .map(|v| ("/etc/systemd/system.conf DefaultEnvironment".into(), v))
}

/// The zone /etc/localtime points at (`Europe/Paris`), if it is a link.
pub fn zone() -> Option<String> {
    let target = fs::read_link("/etc/localtime").ok()?;
    let t = target.to_string_lossy();
    Some(t.split("zoneinfo/").nth(1).unwrap_or(&t).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_from_cgroups() {
        assert_eq!(unit_of("0::/system.slice/nginx.service\n").as_deref(), Some("nginx.service"));
        assert_eq!(unit_of("0::/user.slice/user-0.slice/session-3.scope\n"), None);
        assert_eq!(unit_of("12:pids:/system.slice/cron.service\n").as_deref(), Some("cron.service"));
    }

    #[test]
    fn this_process_is_seen() {
        let me = std::process::id();
        assert!(processes(0).0.iter().any(|p| p.pid == me));
        assert!(!processes(me).0.iter().any(|p| p.pid == me));
    }
}
