//! The import of an exported community: the route (`route.rs`), its file read line by line
//! (`lines.rs`, `input.rs`) and in place (`json.rs`), the rows inserted batch by batch
//! (`rows.rs`, `sql.rs`) with fresh acceptance numbers (`seq.rs`), the relay's own events
//! (`relay.rs`), all in one transaction (`store.rs`).

pub mod input;
pub mod json;
pub mod lines;
pub mod relay;
pub mod route;
pub mod rows;
pub mod seq;
pub mod sql;
pub mod store;
