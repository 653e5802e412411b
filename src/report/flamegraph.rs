//! A flame graph SVG of the call sites, drawn by inferno from the folded
//! stacks.

use super::folded::{self, Weight};
use crate::model::Trace;

pub fn render(trace: &Trace, weight: Weight) -> std::io::Result<Vec<u8>> {
    let lines = folded::lines(trace, weight);
    let mut opts = inferno::flamegraph::Options::default();
    let what = if trace.run.command.is_empty() {
        format!("pid {}", trace.run.root_pids.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
    } else {
        trace.run.command.join(" ")
    };
    opts.title = format!("sysdiet: {what}");
    opts.subtitle = Some(match weight {
        Weight::Count => "syscalls by call site, weighted by calls (exact counts, split among sites by stack samples)".into(),
        Weight::Time => "syscalls by call site, weighted by time in the kernel".into(),
    });
    opts.count_name = match weight {
        Weight::Count => "calls".into(),
        Weight::Time => "ns".into(),
    };
    let mut svg = Vec::new();
    if lines.is_empty() {
        // inferno refuses an empty graph; say why in a valid SVG.
        svg.extend_from_slice(
            b"<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"40\">\
              <text x=\"10\" y=\"25\">sysdiet: no syscalls were counted</text></svg>\n",
        );
        return Ok(svg);
    }
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut svg)?;
    Ok(svg)
}
