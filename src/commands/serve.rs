//! `sysdiet serve`: the host's windows as Prometheus metrics. The socket is
//! bound before BPF loads, so a port in use fails at once; a small HTTP
//! server (tiny_http) serves the page the last window left.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sysdiet::pipeline::Host;
use sysdiet::report::export::{Document, Exporter, JsonExporter};
use sysdiet::report::prometheus::{Metrics, OwnCost};
use sysdiet::{Error, Result};

/// What the HTTP thread serves: the last window's pages.
#[derive(Default)]
struct Pages {
    metrics: String,
    window_json: String,
}

pub fn serve(listen: &str, interval: Duration, bpf_stats: bool, start: impl FnOnce() -> Result<Host>) -> Result<i32> {
    let addr: SocketAddr =
        listen.parse().map_err(|_| Error::Usage(format!("--listen {listen}: not an ADDR:PORT (127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464)")))?;
    if !addr.ip().is_loopback() {
        eprintln!("sysdiet: listening on {addr}, beyond this host: anyone who reaches it sees which programs run here");
    }
    let server = tiny_http::Server::http(addr).map_err(|e| Error::Listen { addr: addr.to_string(), why: e.to_string() })?;
    // Held for as long as we serve: the kernel counts BPF run time while
    // any such fd is open.
    let _stats = if bpf_stats { Some(enable_bpf_stats()?) } else { None };
    let mut host = start()?;
    let pages = Arc::new(Mutex::new(Pages { metrics: Metrics::new().encode(), window_json: String::new() }));
    let served = Arc::clone(&pages);
    std::thread::Builder::new().name("sysdiet-http".into()).spawn(move || answer(server, &served))?;
    eprintln!("sysdiet: serving http://{addr}/metrics, a window every {}", sysdiet::human::duration(interval.as_nanos() as u64));

    let mut metrics = Metrics::new();
    let mut next = Instant::now() + interval;
    loop {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += interval;
        let w = host.window()?;
        let (cpu, rss) = sysdiet::linux::own_usage();
        let own = OwnCost { bpf: host.run_stats(), cpu_seconds: cpu.as_secs_f64(), resident_bytes: rss };
        metrics.update(&w.window, &w.findings, &own);
        let json = JsonExporter.serialize(&Document::Window { window: &w.window, findings: &w.findings })?;
        let mut p = pages.lock().unwrap_or_else(|e| e.into_inner());
        p.metrics = metrics.encode();
        p.window_json = String::from_utf8_lossy(&json).into_owned();
    }
}

fn answer(server: tiny_http::Server, pages: &Mutex<Pages>) {
    let header = |v: &str| tiny_http::Header::from_bytes(&b"Content-Type"[..], v.as_bytes()).expect("a valid header");
    for request in server.incoming_requests() {
        let (body, kind, status) = {
            let p = pages.lock().unwrap_or_else(|e| e.into_inner());
            match request.url().split('?').next().unwrap_or("") {
                "/metrics" => (p.metrics.clone(), "text/plain; version=0.0.4; charset=utf-8", 200),
                "/window.json" if p.window_json.is_empty() => ("no window yet\n".to_string(), "text/plain", 503),
                "/window.json" => (p.window_json.clone(), "application/json", 200),
                "/" => ("sysdiet serve: /metrics (Prometheus), /window.json (the last window)\n".to_string(), "text/plain", 200),
                _ => ("not found: try /metrics\n".to_string(), "text/plain", 404),
            }
        };
        let response = tiny_http::Response::from_string(body).with_header(header(kind)).with_status_code(status);
        let _ = request.respond(response);
    }
}

/// Turns on the kernel's BPF run-time statistics until the fd is closed.
fn enable_bpf_stats() -> Result<std::os::fd::OwnedFd> {
    // SAFETY: a plain syscall wrapper; a non-negative return is a new fd we own.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(Error::Usage(format!(
            "--bpf-stats: the kernel refused to count BPF run time ({}): run as root, or drop --bpf-stats",
            std::io::Error::from_raw_os_error(-fd)
        )));
    }
    // SAFETY: fd was just returned to us and is owned by nothing else.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}
