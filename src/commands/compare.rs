//! `sysdiet compare`: the baseline and its variants, measured.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;

use crate::compare::{compare as measure, split_words, CompareOptions, Variant};
use crate::error::{Error, Result};
use crate::report::{Format, ReportOptions};

/// What `sysdiet compare` takes (besides where to write), as the command
/// line gives it.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// A variant with this environment variable set (repeatable; all of them form one variant)
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// ... or with this variable removed (repeatable)
    #[arg(long = "unset-env", value_name = "NAME")]
    pub unset_env: Vec<String>,
    /// A variant that is another command line (repeatable)
    #[arg(long = "vs", value_name = "'CMD'")]
    pub vs: Vec<String>,
    /// Timed runs per variant
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Untimed runs per variant first
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Fail when a variant's stdout differs from the baseline's
    #[arg(long)]
    pub check_output: bool,
    /// Replace matches of REGEX in outputs before comparing them (repeatable)
    #[arg(long, value_name = "REGEX")]
    pub normalize: Vec<String>,
    /// Go on when the command exits non-zero
    #[arg(long)]
    pub ignore_failure: bool,
    /// Skip the traced runs (no syscall diff)
    #[arg(long)]
    pub no_trace: bool,
    /// Also write the result as a Markdown table
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// The baseline command
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// The variants: the baseline A, then B with the environment changes (if
/// any), then each --vs command line.
pub fn variants(a: &CompareArgs) -> Result<Vec<Variant>> {
    if a.command.is_empty() {
        return Err(Error::Usage("no command given: sysdiet compare [--env K=V | --vs 'CMD'] -- COMMAND [ARGS...]".into()));
    }
    let base_env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let mut out = vec![Variant { label: "A".into(), change: String::new(), command: a.command.clone(), env: base_env.clone() }];
    if !a.env.is_empty() || !a.unset_env.is_empty() {
        let mut env = base_env.clone();
        let mut change = Vec::new();
        for kv in &a.env {
            let (k, v) = kv.split_once('=').ok_or_else(|| Error::Usage(format!("--env {kv}: write it as NAME=VALUE (NAME= for empty)")))?;
            if k.is_empty() {
                return Err(Error::Usage(format!("--env {kv}: the name is empty")));
            }
            env.retain(|(name, _)| name != k);
            env.push((k.into(), v.into()));
            change.push(format!("--env {}", crate::diagnose::shell_quote(kv)));
        }
        for k in &a.unset_env {
            env.retain(|(name, _)| name != k.as_str());
            change.push(format!("--unset-env {k}"));
        }
        out.push(Variant { label: "B".into(), change: change.join(" "), command: a.command.clone(), env });
    }
    for vs in &a.vs {
        let command = split_words(vs)?;
        if command.is_empty() {
            return Err(Error::Usage("--vs needs a command line".into()));
        }
        let label = ((b'A' + out.len() as u8) as char).to_string();
        out.push(Variant { label, change: format!("--vs {}", crate::diagnose::shell_quote(vs)), command, env: base_env.clone() });
    }
    if out.len() < 2 {
        return Err(Error::Usage("nothing to compare with: give --env K=V, --unset-env K or --vs 'CMD'".into()));
    }
    Ok(out)
}

pub fn run(a: CompareArgs, report: &ReportOptions) -> Result<i32> {
    let normalize = a
        .normalize
        .iter()
        .map(|r| regex::Regex::new(r).map_err(|e| Error::Usage(format!("--normalize {r}: {e}"))))
        .collect::<Result<Vec<_>>>()?;
    let variants = variants(&a)?;
    let opts = CompareOptions {
        runs: a.runs,
        warmup: a.warmup,
        check_output: a.check_output,
        normalize,
        ignore_failure: a.ignore_failure,
        trace: !a.no_trace,
        progress: std::io::stderr().is_terminal(),
    };
    let result = measure(&variants, &opts)?;
    if let Some(path) = &a.export_markdown {
        std::fs::write(path, crate::report::compare::markdown(&result)).map_err(|source| Error::File { path: path.clone(), source })?;
    }
    let body = match report.format {
        Format::Json => serde_json::to_string_pretty(&result).expect("serializes") + "\n",
        Format::Text => crate::report::compare::render(&result),
    };
    crate::report::write_body(&body, report)?;
    // A fix that changes the output is not a fix: say so in the status too.
    Ok(if result.variants.iter().any(|v| v.output_differs.is_some()) { 1 } else { 0 })
}
