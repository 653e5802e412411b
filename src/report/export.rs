//! Where results go, in hyperfine's shape: one `Exporter` per format turns
//! a `Document` into bytes, and `Outputs` holds every (exporter, place) the
//! command line asked for. Every place is opened when it is added, before
//! anything runs, so a bad path fails at once instead of after the trace.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::folded::Weight;
use crate::bench::Measurements;
use crate::compare::budget::BudgetResult;
use crate::compare::{Comparison, RunDiff};
use crate::diagnose::host::HostAudit;
use crate::diagnose::Finding;
use crate::error::{Error, Result};
use crate::model::window::Window;
use crate::model::Trace;

/// A result to write: what each command produces.
#[derive(Clone, Copy)]
pub enum Document<'a> {
    Run {
        trace: &'a Trace,
        findings: &'a [Finding],
        /// `run --budget`: the budget and what the run broke of it.
        budget: Option<&'a BudgetResult>,
    },
    Compare(&'a Comparison),
    /// Two saved runs compared (`diff`).
    Diff(&'a RunDiff),
    Bench(&'a Measurements),
    Check(&'a HostAudit),
    /// One window of `top` or `serve`: a trace with a row per program.
    Window {
        window: &'a Window,
        findings: &'a [Finding],
    },
}

impl Document<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Document::Run { .. } => "a trace",
            Document::Compare(_) => "a comparison",
            Document::Diff(_) => "a diff",
            Document::Bench(_) => "a bench",
            Document::Check(_) => "a host check",
            Document::Window { .. } => "a window of the host",
        }
    }
}

/// Turns a document into the bytes of one format.
pub trait Exporter {
    /// The format's name, for messages.
    fn name(&self) -> &'static str;
    fn serialize(&self, doc: &Document) -> Result<Vec<u8>>;
}

/// The error for a format that has nothing to say about a document; the
/// command line offers only the pairs that work, so this is a bug.
fn unsupported(exporter: &dyn Exporter, doc: &Document) -> Error {
    Error::Usage(format!("{} output is not available for {}", exporter.name(), doc.kind()))
}

pub struct TextExporter {
    /// Counts per process and per thread, for a trace.
    pub per_thread: bool,
}

impl Exporter for TextExporter {
    fn name(&self) -> &'static str {
        "text"
    }
    fn serialize(&self, doc: &Document) -> Result<Vec<u8>> {
        Ok(match doc {
            Document::Run { trace, findings, budget } => {
                let mut text = super::text::render(trace, findings, self.per_thread);
                if let Some(b) = budget {
                    text.push_str(&super::diff::budget(b));
                }
                text
            }
            Document::Compare(c) => super::compare::render(c),
            Document::Diff(d) => super::diff::render(d),
            Document::Bench(m) => super::bench::render(m),
            Document::Check(a) => super::check::render(a),
            Document::Window { window, findings } => {
                super::top::text(window, findings, &super::top::rows(window, findings, super::top::SortBy::Waste, ""))
            }
        }
        .into_bytes())
    }
}

/// Every document as JSON with its schema version (docs/json.md).
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn name(&self) -> &'static str {
        "JSON"
    }
    fn serialize(&self, doc: &Document) -> Result<Vec<u8>> {
        Ok(super::json::render(doc).into_bytes())
    }
}

pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn name(&self) -> &'static str {
        "Markdown"
    }
    fn serialize(&self, doc: &Document) -> Result<Vec<u8>> {
        match doc {
            Document::Compare(c) => Ok(super::compare::markdown(c).into_bytes()),
            Document::Diff(d) => Ok(super::diff::markdown(d).into_bytes()),
            Document::Bench(m) => Ok(super::bench::markdown(m).into_bytes()),
            _ => Err(unsupported(self, doc)),
        }
    }
}

/// Call sites as folded stacks.
pub struct FoldedExporter {
    pub weight: Weight,
}

impl Exporter for FoldedExporter {
    fn name(&self) -> &'static str {
        "folded-stack"
    }
    fn serialize(&self, doc: &Document) -> Result<Vec<u8>> {
        match doc {
            Document::Run { trace, .. } => Ok(super::folded::render(trace, self.weight).into_bytes()),
            _ => Err(unsupported(self, doc)),
        }
    }
}

/// Call sites as a flame graph SVG.
pub struct FlameGraphExporter {
    pub weight: Weight,
}

impl Exporter for FlameGraphExporter {
    fn name(&self) -> &'static str {
        "flame graph"
    }
    fn serialize(&self, doc: &Document) -> Result<Vec<u8>> {
        match doc {
            Document::Run { trace, .. } => Ok(super::flamegraph::render(trace, self.weight)?),
            _ => Err(unsupported(self, doc)),
        }
    }
}

/// A bench's ns per call plotted as an SVG.
pub struct SvgExporter;

impl Exporter for SvgExporter {
    fn name(&self) -> &'static str {
        "SVG plot"
    }
    fn serialize(&self, doc: &Document) -> Result<Vec<u8>> {
        match doc {
            Document::Bench(m) => Ok(super::plot::render(m).into_bytes()),
            _ => Err(unsupported(self, doc)),
        }
    }
}

/// Where one output is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    Stderr,
    File(PathBuf),
}

impl Destination {
    /// `-o FILE`: `-` is stdout; no flag, the command's own stream.
    pub fn from_arg(path: Option<&Path>, default: Destination) -> Destination {
        match path {
            None => default,
            Some(p) if p.as_os_str() == "-" => Destination::Stdout,
            Some(p) => Destination::File(p.to_path_buf()),
        }
    }
}

enum Sink {
    Stdout,
    Stderr,
    File(PathBuf, File),
}

impl Sink {
    fn open(to: &Destination) -> Result<Sink> {
        Ok(match to {
            Destination::Stdout => Sink::Stdout,
            Destination::Stderr => Sink::Stderr,
            Destination::File(path) => {
                refuse_planted_symlink(path)?;
                let file = File::create(path).map_err(|source| Error::File { path: path.clone(), source })?;
                Sink::File(path.clone(), file)
            }
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        match self {
            // A closed pipe (`| head`) or terminal is not worth failing for.
            Sink::Stdout => {
                let _ = std::io::stdout().lock().write_all(bytes);
            }
            Sink::Stderr => {
                let _ = std::io::stderr().lock().write_all(bytes);
            }
            Sink::File(path, file) => file.write_all(bytes).map_err(|source| Error::File { path: path.clone(), source })?,
        }
        Ok(())
    }
}

/// A symlink in a sticky world-writable directory (/tmp), owned by someone
/// who is neither the directory's owner nor us, is not followed: another
/// user may have planted it to make root truncate a file of their choice.
/// The same test as the kernel's `fs.protected_symlinks`.
fn refuse_planted_symlink(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(link) = std::fs::symlink_metadata(path) else { return Ok(()) };
    if !link.file_type().is_symlink() {
        return Ok(());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(dir_meta) = std::fs::metadata(dir) else { return Ok(()) };
    let sticky_public = dir_meta.mode() & 0o1002 == 0o1002;
    let me = nix::unistd::geteuid().as_raw();
    if sticky_public && link.uid() != dir_meta.uid() && link.uid() != me {
        return Err(Error::Usage(format!(
            "{}: a symlink owned by uid {} in a shared sticky directory; not writing through it (remove it, or give another path)",
            path.display(),
            link.uid()
        )));
    }
    Ok(())
}

/// The outputs a command writes, opened before it runs.
#[derive(Default)]
pub struct Outputs {
    outputs: Vec<(Box<dyn Exporter>, Sink)>,
}

impl Outputs {
    /// Adds an output and opens its place now.
    pub fn add(&mut self, exporter: impl Exporter + 'static, to: &Destination) -> Result<()> {
        self.outputs.push((Box::new(exporter), Sink::open(to)?));
        Ok(())
    }

    /// Writes the document to every output, in the order they were added.
    pub fn write(&mut self, doc: &Document) -> Result<()> {
        for (exporter, sink) in &mut self.outputs {
            let bytes = exporter.serialize(doc)?;
            sink.write(&bytes)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dash_is_stdout() {
        assert_eq!(Destination::from_arg(Some(Path::new("-")), Destination::Stderr), Destination::Stdout);
        assert_eq!(Destination::from_arg(None, Destination::Stderr), Destination::Stderr);
        assert_eq!(Destination::from_arg(Some(Path::new("x.json")), Destination::Stderr), Destination::File("x.json".into()));
    }

    #[test]
    fn a_bad_path_fails_when_added() {
        let mut out = Outputs::default();
        let err = out.add(JsonExporter, &Destination::File("/nonexistent/dir/x.json".into())).expect_err("no such directory");
        assert!(err.to_string().starts_with("/nonexistent/dir/x.json: "), "{err}");
    }

    #[test]
    fn formats_that_do_not_apply_say_so() {
        let m = Measurements::default();
        let err = FoldedExporter { weight: Weight::Count }.serialize(&Document::Bench(&m)).err().unwrap();
        assert_eq!(err.to_string(), "folded-stack output is not available for a bench");
    }
}
