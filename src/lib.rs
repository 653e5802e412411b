//! sysdiet: find the system calls a program makes for nothing, and who
//! makes them. Data flows target → trace (+ stacks) → model → report.

pub mod bench;
pub mod commands;
pub mod compare;
pub mod diagnose;
pub mod error;
pub mod model;
pub mod report;
pub mod stacks;
pub mod target;
pub mod trace;

pub use error::{Error, Result};
pub use model::Trace;
