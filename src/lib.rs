//! sysdiet: find the system calls a program makes for nothing, and who
//! makes them. Data flows target → backend (+ stacks) → model → diagnose →
//! report; `pipeline` runs that flow for a command or for running
//! processes, `compare` and `bench` measure on top of it. The layers, lowest
//! first (tests/layers.rs keeps imports pointing down):
//!
//! error, linux, stats → model → human → target → backend → stacks →
//! diagnose → pipeline → compare, bench → report

pub mod backend;
pub mod bench;
pub mod compare;
pub mod diagnose;
pub mod error;
pub mod human;
pub mod linux;
pub mod model;
pub mod pipeline;
pub mod report;
pub mod stacks;
pub mod stats;
pub mod target;
pub mod timings;

pub use error::{Error, Result};
pub use model::Trace;
