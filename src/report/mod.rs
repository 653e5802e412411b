//! Renderers: they print a Trace and decide nothing.

pub mod bench;
pub mod callsites;
pub mod check;
pub mod compare;
pub mod findings;
pub mod flamegraph;
pub mod folded;
pub mod format;
pub mod json;
pub mod plot;
pub mod text;

pub use folded::Weight;

use std::io::Write;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::diagnose::Finding;
use crate::model::Trace;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    pub format: Format,
    /// Where to write; stderr when None, so the command's stdout stays its own.
    pub output: Option<PathBuf>,
    pub per_thread: bool,
    /// Call sites as folded stacks / a flame graph SVG, weighted so.
    pub folded: Option<PathBuf>,
    pub flamegraph: Option<PathBuf>,
    pub weight: Weight,
    /// Report small findings too.
    pub all: bool,
}

pub fn write(trace: &Trace, findings: &[Finding], opts: &ReportOptions) -> Result<()> {
    if let Some(path) = &opts.folded {
        write_file(path, folded::render(trace, opts.weight).as_bytes())?;
    }
    if let Some(path) = &opts.flamegraph {
        let svg = flamegraph::render(trace, opts.weight).map_err(|source| Error::File { path: path.clone(), source })?;
        write_file(path, &svg)?;
    }
    let body = match opts.format {
        Format::Text => text::render(trace, findings, opts.per_thread),
        Format::Json => json::render(trace, findings),
    };
    write_body(&body, opts)
}

/// Writes a rendered report where the options say: a file, or stderr.
pub fn write_body(body: &str, opts: &ReportOptions) -> Result<()> {
    match &opts.output {
        Some(path) => write_file(path, body.as_bytes()),
        None => {
            let mut err = std::io::stderr().lock();
            // A closed stderr is not worth failing the run for.
            let _ = err.write_all(body.as_bytes());
            Ok(())
        }
    }
}

/// Writes a result that is the command's own output (bench): stdout, or
/// the file the options name.
pub fn write_result(body: &str, opts: &ReportOptions) -> Result<()> {
    match &opts.output {
        Some(path) => write_file(path, body.as_bytes()),
        None => {
            // A closed pipe (`| head`) is not an error worth reporting.
            let _ = std::io::stdout().lock().write_all(body.as_bytes());
            Ok(())
        }
    }
}

fn write_file(path: &std::path::Path, data: &[u8]) -> Result<()> {
    std::fs::write(path, data).map_err(|source| Error::File { path: path.to_path_buf(), source })
}
