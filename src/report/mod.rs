//! Renderers: they print what the layers below decided, and decide
//! nothing. `export` says which formats there are and where they go.

pub mod bench;
pub mod callsites;
pub mod check;
pub mod compare;
pub mod diff;
pub mod export;
pub mod findings;
pub mod flamegraph;
pub mod folded;
pub mod json;
mod lost;
pub mod plot;
pub mod prometheus;
pub mod text;
pub mod timings;
pub mod top;

#[cfg(test)]
mod snapshots;

pub use export::{Destination, Document, Exporter, Outputs};
pub use folded::Weight;

use crate::model::Trace;

/// `pid 1234`, or for a row folding many exited processes of a program,
/// `true ×19,000 (folded)`.
pub fn who(trace: &Trace, pid: u32) -> String {
    match trace.processes.iter().find(|p| p.pid == pid && p.folded > 0) {
        Some(p) => format!("{} ×{} (folded)", crate::human::escaped(&p.comm), crate::human::thousands(p.folded)),
        None => format!("pid {pid}"),
    }
}
