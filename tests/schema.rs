//! docs/schema/*.json are generated from the model types; this test fails
//! when they are stale. `make schema` (SYSDIET_BLESS=1) writes them anew.

use std::path::PathBuf;

#[test]
fn the_committed_schemas_are_current() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/schema"));
    let bless = std::env::var_os("SYSDIET_BLESS").is_some();
    let mut stale = Vec::new();
    for (name, schema) in sysdiet::report::json::schemas() {
        let path = dir.join(format!("{name}.schema.json"));
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &schema).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(schema.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(stale.is_empty(), "stale JSON schemas (run `make schema` and commit them): {}", stale.join(", "));
}

#[test]
fn every_document_has_a_version() {
    for (name, schema) in sysdiet::report::json::schemas() {
        let s: serde_json::Value = serde_json::from_str(&schema).unwrap();
        let required = s["required"].as_array().unwrap_or_else(|| panic!("{name}: no required list: {s}"));
        assert!(required.iter().any(|r| r == "version"), "{name} has no version");
    }
}
