//! The child side of `sysdiet bench`: one process per loop, so each runs
//! with its own environment (TZ) and nothing of the parent's. It times the
//! loop and prints one JSON line; or, to be counted, just runs it.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::loops::{BenchLoop, LOOPS};

/// How long one timed run lasts when the iterations are calibrated.
const RUN_TARGET: Duration = Duration::from_millis(40);

/// What a worker was asked to do.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    pub bench_loop: usize,
    pub threads: usize,
    /// Calls per thread per run; 0 means calibrate to RUN_TARGET.
    pub iterations: u64,
    pub runs: usize,
    /// Only make the calls, untimed (`iterations` per thread, the threads
    /// started together): the parent counts
    /// the process's syscalls.
    pub count: bool,
}

impl Job {
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            WORKER_COMMAND.to_string(),
            self.bench_loop.to_string(),
            self.threads.to_string(),
            self.iterations.to_string(),
            self.runs.to_string(),
        ];
        if self.count {
            a.push("count".into());
        }
        a
    }

    pub fn parse(args: &[String]) -> Option<Job> {
        let [bench_loop, threads, iterations, runs, rest @ ..] = args else { return None };
        let job = Job {
            bench_loop: bench_loop.parse().ok().filter(|&k| k < LOOPS.len())?,
            threads: threads.parse().ok().filter(|&t| t > 0)?,
            iterations: iterations.parse().ok()?,
            runs: runs.parse().ok().filter(|&r| r > 0)?,
            count: rest == ["count"],
        };
        (rest.is_empty() || job.count).then_some(job)
    }
}

/// The hidden command the parent runs itself with.
pub const WORKER_COMMAND: &str = "__bench-worker";

/// The worker's answer: calls per thread per run, and each run's
/// nanoseconds per call (the mean over its threads).
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timed {
    pub iterations: u64,
    pub ns_per_call: Vec<f64>,
}

/// Runs `job` in this process; prints the timings for a timed job.
pub fn work(job: Job) -> i32 {
    let bench_loop = &LOOPS[job.bench_loop];
    let done = if job.count {
        calls(bench_loop, &job)
    } else {
        time(bench_loop, &job).map(|timed| println!("{}", serde_json::to_string(&timed).expect("serializes")))
    };
    match done {
        Ok(()) => 0,
        // The parent shows this line in its error.
        Err(e) => {
            eprintln!("cannot start {} threads: {e}", job.threads);
            1
        }
    }
}

/// Runs `f` on `n` new threads that share one barrier, so that they can
/// start together and contend as they would; their results, in order.
fn on_threads<T: Send + 'static>(n: usize, f: impl Fn(&Barrier) -> T + Send + Sync + 'static) -> std::io::Result<Vec<T>> {
    let start = Arc::new(Barrier::new(n));
    let f = Arc::new(f);
    let threads = (0..n)
        .map(|_| {
            let (start, f) = (Arc::clone(&start), Arc::clone(&f));
            std::thread::Builder::new().spawn(move || f(&start))
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    Ok(threads.into_iter().map(|t| t.join().expect("loop thread")).collect())
}

fn time(bench_loop: &'static BenchLoop, job: &Job) -> std::io::Result<Timed> {
    let iterations = if job.iterations > 0 { job.iterations } else { calibrate(bench_loop) };
    let runs = job.runs;
    let per_thread = on_threads(job.threads, move |start| {
        bench_loop.run((iterations / 20).max(1)); // warm: first-call costs out
        (0..runs)
            .map(|_| {
                start.wait();
                let t0 = Instant::now();
                bench_loop.run(iterations);
                t0.elapsed().as_nanos() as f64 / iterations as f64
            })
            .collect::<Vec<f64>>()
    })?;
    let ns_per_call = (0..runs).map(|r| per_thread.iter().map(|t| t[r]).sum::<f64>() / job.threads as f64).collect();
    Ok(Timed { iterations, ns_per_call })
}

/// The calls alone, from `job.threads` threads at once (one: this one).
fn calls(bench_loop: &'static BenchLoop, job: &Job) -> std::io::Result<()> {
    if job.threads == 1 {
        bench_loop.run(job.iterations);
        return Ok(());
    }
    let iterations = job.iterations;
    on_threads(job.threads, move |start| {
        start.wait();
        bench_loop.run(iterations);
    })?;
    Ok(())
}

/// Calls per run so that one run lasts about RUN_TARGET on one thread.
fn calibrate(bench_loop: &BenchLoop) -> u64 {
    let mut n = 1u64;
    loop {
        let t0 = Instant::now();
        bench_loop.run(n);
        let took = t0.elapsed();
        if took >= RUN_TARGET / 8 || n >= 1 << 40 {
            let scale = RUN_TARGET.as_secs_f64() / took.as_secs_f64().max(1e-9);
            return ((n as f64 * scale) as u64).max(1);
        }
        n *= 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_round_trip_and_bad_ones_are_refused() {
        let job = Job { bench_loop: 3, threads: 2, iterations: 0, runs: 5, count: true };
        let back = Job::parse(&job.args()[1..]).unwrap();
        assert_eq!((back.bench_loop, back.threads, back.iterations, back.runs, back.count), (3, 2, 0, 5, true));
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(Job::parse(&s(&["999", "1", "0", "5"])).is_none());
        assert!(Job::parse(&s(&["0", "0", "0", "5"])).is_none());
        assert!(Job::parse(&s(&["0", "1", "0", "5", "extra"])).is_none());
    }

    #[test]
    fn timing_gives_one_figure_per_run() {
        let t = time(&LOOPS[0], &Job { bench_loop: 0, threads: 2, iterations: 1000, runs: 3, count: false }).unwrap();
        assert_eq!(t.iterations, 1000);
        assert_eq!(t.ns_per_call.len(), 3);
        assert!(t.ns_per_call.iter().all(|&ns| ns >= 0.0));
    }
}
