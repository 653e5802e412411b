//! The Trace: what a traced run did, as plain data. Tracers fill it, rules
//! read it, renderers print it. No I/O here.

mod argument;
pub mod builder;
pub mod callsite;
mod counts;
mod histogram;
mod lost;
mod run;
mod trace;
pub mod window;

pub use argument::*;
pub use callsite::{in_c_runtime, CallSite, Frame, Sampling, SiteShare};
pub use counts::*;
pub use histogram::Histogram;
pub use lost::*;
pub use run::*;
pub use trace::*;

/// Bumped whenever the JSON shape changes incompatibly (docs/json.md).
pub const SCHEMA_VERSION: u32 = 1;
