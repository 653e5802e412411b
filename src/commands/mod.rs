//! The commands, thin: each reads its arguments, opens its outputs, runs
//! the library's pipeline and writes what it returned.

pub mod analyze;
pub mod attach;
pub mod bench;
pub mod check;
pub mod compare;
pub mod diff;
pub mod run;
pub mod serve;
pub mod top;

use sysdiet::report::export::{JsonExporter, MarkdownExporter, TextExporter};
use sysdiet::report::{Destination, Outputs};
use sysdiet::Result;

use crate::cli::{ExportArgs, OutputArgs};

/// The main output: text or JSON, to `-o FILE` or the command's own stream
/// (stderr for run and attach, whose stdout is the traced command's).
pub fn main_output(out: &OutputArgs, stream: Destination, per_thread: bool) -> Result<Outputs> {
    let mut outputs = Outputs::default();
    let to = Destination::from_arg(out.output.as_deref(), stream);
    if out.json {
        outputs.add(JsonExporter, &to)?;
    } else {
        outputs.add(TextExporter { per_thread }, &to)?;
    }
    Ok(outputs)
}

/// hyperfine's --export-json / --export-markdown, besides the main output.
pub fn add_exports(outputs: &mut Outputs, export: &ExportArgs) -> Result<()> {
    if let Some(path) = &export.export_json {
        outputs.add(JsonExporter, &Destination::from_arg(Some(path), Destination::Stdout))?;
    }
    if let Some(path) = &export.export_markdown {
        outputs.add(MarkdownExporter, &Destination::from_arg(Some(path), Destination::Stdout))?;
    }
    Ok(())
}

/// A progress bar on stderr for `sysdiet WHAT`, when stderr is a terminal.
pub fn progress_bar(what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(1);
    let style = indicatif::ProgressStyle::with_template(&format!("sysdiet {what} {{bar:30}} {{pos}}/{{len}}  {{msg}}")).expect("a valid template");
    bar.set_style(style);
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}
