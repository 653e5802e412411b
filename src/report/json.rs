//! Every document as JSON, with the schema version first (docs/json.md;
//! the schemas in docs/schema/ are generated from these types).

use serde::{Deserialize, Serialize};

use super::export::Document;
use crate::diagnose::Finding;
use crate::model::{Trace, SCHEMA_VERSION};

/// What `run` and `attach` write.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunDocument {
    pub version: u32,
    #[serde(flatten)]
    pub trace: Trace,
    /// What the rules found, most saving first.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// `run --budget`: the budget and what the run broke of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::compare::budget::BudgetResult>,
}

/// What `top --json` and `serve`'s /window.json write: one window of the
/// host, as a trace whose process rows are programs.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct WindowDocument {
    pub version: u32,
    #[serde(flatten)]
    pub trace: Trace,
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// What each process row of the trace stands for.
    pub programs: Vec<crate::model::window::ProgramRow>,
}

/// What `compare`, `bench` and `check` write: their result with the
/// version beside it.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct Versioned<T> {
    pub version: u32,
    #[serde(flatten)]
    pub result: T,
}

pub fn render(doc: &Document) -> String {
    // A trace's documents are serialized from borrowed parts, without
    // copying the Trace; a window's adds which program each row is.
    #[derive(Serialize)]
    struct Borrowed<'a> {
        version: u32,
        #[serde(flatten)]
        trace: &'a Trace,
        findings: &'a [Finding],
        #[serde(skip_serializing_if = "Option::is_none")]
        programs: Option<Vec<crate::model::window::ProgramRow>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        budget: Option<&'a crate::compare::budget::BudgetResult>,
    }
    let mut s = match *doc {
        Document::Run { trace, findings, budget } => {
            serde_json::to_string_pretty(&Borrowed { version: SCHEMA_VERSION, trace, findings, programs: None, budget })
        }
        Document::Compare(c) => serde_json::to_string_pretty(&Versioned { version: SCHEMA_VERSION, result: c }),
        Document::Diff(d) => serde_json::to_string_pretty(&Versioned { version: SCHEMA_VERSION, result: d }),
        Document::Bench(m) => serde_json::to_string_pretty(&Versioned { version: SCHEMA_VERSION, result: m }),
        Document::Check(a) => serde_json::to_string_pretty(&Versioned { version: SCHEMA_VERSION, result: a }),
        Document::Window { window, findings } => serde_json::to_string_pretty(&Borrowed {
            version: SCHEMA_VERSION,
            trace: &window.trace,
            findings,
            programs: Some(window.program_rows()),
            budget: None,
        }),
    }
    .expect("the model always serializes");
    s.push('\n');
    s
}

/// The JSON Schema of each document, generated from the types: (name,
/// schema). docs/schema/ holds them; tests/schema.rs keeps them current.
pub fn schemas() -> Vec<(&'static str, String)> {
    let pretty = |s: schemars::Schema| serde_json::to_string_pretty(&s).expect("a schema serializes") + "\n";
    vec![
        ("run", pretty(schemars::schema_for!(RunDocument))),
        ("compare", pretty(schemars::schema_for!(Versioned<crate::compare::Comparison>))),
        ("diff", pretty(schemars::schema_for!(Versioned<crate::compare::RunDiff>))),
        ("bench", pretty(schemars::schema_for!(Versioned<crate::bench::Measurements>))),
        ("check", pretty(schemars::schema_for!(Versioned<crate::diagnose::host::HostAudit>))),
        ("window", pretty(schemars::schema_for!(WindowDocument))),
    ]
}
