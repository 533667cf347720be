//! One line of a verdict: a criterion, what was found, whether it passes (every criterion of
//! `buzz-load check` speaks in these).

use serde::Serialize;

/// One criterion's line of the verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// What is checked.
    pub check: String,
    /// What was found.
    pub found: String,
    /// Whether it passes.
    pub pass: bool,
}
