//! `sysdiet diff BASE NEW`: two saved runs compared, and judged against
//! the limits given. A run is what `run --json` wrote, or a strace log
//! (read as `analyze` reads it).

use std::io::Read;
use std::path::Path;

use sysdiet::compare::diff_runs;
use sysdiet::compare::gate::{Ignore, Limits, BREACH_STATUS};
use sysdiet::diagnose::Finding;
use sysdiet::error::Error;
use sysdiet::model::{Trace, SCHEMA_VERSION};
use sysdiet::pipeline::TraceOptions;
use sysdiet::report::json::RunDocument;
use sysdiet::report::{Document, Outputs};
use sysdiet::Result;

pub fn diff(base: &Path, new: &Path, ignore: &Ignore, limits: &Limits, mut outputs: Outputs) -> Result<i32> {
    let (a, b) = (load(base)?, load(new)?);
    let (base_name, new_name) = (base.display().to_string(), new.display().to_string());
    let d = diff_runs((&base_name, &a.0, &a.1), (&new_name, &b.0, &b.1), ignore, limits);
    outputs.write(&Document::Diff(&d))?;
    Ok(if d.breaches.is_empty() { 0 } else { BREACH_STATUS })
}

/// A saved run: a sysdiet JSON document of a trace, or a strace log.
fn load(path: &Path) -> Result<(Trace, Vec<Finding>)> {
    let fail = |why: String| Error::Log { path: path.display().to_string(), why };
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => fail("no such file (check the path)".into()),
        _ => fail(e.to_string()),
    };
    // Its first character tells: a log (which may be gigabytes) is left
    // to analyze's streaming reader, not read here too.
    let file = std::io::BufReader::new(std::fs::File::open(path).map_err(io)?);
    let first = file.bytes().map_while(std::io::Result::ok).find(|b| !b.is_ascii_whitespace());
    if first != Some(b'{') {
        let analyzed = sysdiet::pipeline::analyze(&[path.to_path_buf()], &TraceOptions { stacks: true, ..Default::default() })?;
        return Ok((analyzed.trace, analyzed.findings));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let give = "give what sysdiet run --json wrote, or a strace -f -o log";
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| fail(format!("not valid JSON ({e}): {give}")))?;
    match value.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(fail(format!("a sysdiet document of version {v}; this sysdiet reads version {SCHEMA_VERSION}: save the run again with it")))
        }
        None => return Err(fail(format!("JSON, but no sysdiet document (it has no version): {give}"))),
    }
    if value.get("run").is_none() || value.get("syscalls").is_none() {
        let kind = if value.get("variants").is_some() {
            "a compare result"
        } else if value.get("loops").is_some() {
            "a bench result"
        } else {
            "a sysdiet document"
        };
        return Err(fail(format!("{kind}, not a run's: {give}")));
    }
    let doc: RunDocument = serde_json::from_value(value).map_err(|e| fail(format!("a run document sysdiet cannot read ({e}): {give}")))?;
    Ok((doc.trace, doc.findings))
}
