//! The JSON report: the whole Trace, with a schema version (docs/json.md).

use serde::{Deserialize, Serialize};

use crate::diagnose::Finding;
use crate::model::{Trace, SCHEMA_VERSION};

#[derive(Serialize, Deserialize)]
pub struct Document {
    pub version: u32,
    #[serde(flatten)]
    pub trace: Trace,
    /// What the rules found, most saving first.
    #[serde(default)]
    pub findings: Vec<Finding>,
}

pub fn render(trace: &Trace, findings: &[Finding]) -> String {
    let doc = Document { version: SCHEMA_VERSION, trace: trace.clone(), findings: findings.to_vec() };
    let mut s = serde_json::to_string_pretty(&doc).expect("a Trace always serializes");
    s.push('\n');
    s
}
