//! Renderers: they print a Trace and decide nothing.

pub mod format;
pub mod json;
pub mod text;

use std::io::Write;
use std::path::PathBuf;

use crate::error::{Error, Result};
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
}

pub fn write(trace: &Trace, opts: &ReportOptions) -> Result<()> {
    let body = match opts.format {
        Format::Text => text::render(trace, opts.per_thread),
        Format::Json => json::render(trace),
    };
    match &opts.output {
        Some(path) => std::fs::write(path, body).map_err(|source| Error::File { path: path.clone(), source }),
        None => {
            let mut err = std::io::stderr().lock();
            // A closed stderr is not worth failing the run for.
            let _ = err.write_all(body.as_bytes());
            Ok(())
        }
    }
}
