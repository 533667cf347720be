//! A community out of one deployment and into another: the export route (`export.rs`), the
//! NDJSON format both share (`format.rs`) and the import (`import/`).

pub mod export;
pub mod format;
pub mod import;
