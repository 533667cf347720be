//! How an import fails, and how it opens its file: the error of every refusal (the import's
//! store, rows, seq and line modules share them).

use std::path::Path;

use tokio::io::BufReader;

use crate::portability::import::lines::{BoundedLines, LineError, LineTooLong};

/// Why an import was refused.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file is not a complete, valid export (400 `invalid_export`).
    #[error("{0}")]
    Invalid(String),
    /// The community id exists here with other contents (409 `community_conflict`).
    #[error("community conflict")]
    CommunityConflict,
    /// The host is bound to another community (409 `host_conflict`).
    #[error("host conflict")]
    HostConflict,
    /// A line is longer than `BUZZ_IMPORT_MAX_LINE_BYTES` (413 `import_line_too_long`).
    #[error(transparent)]
    LineTooLong(#[from] LineTooLong),
    /// The spooled body could not be read (503).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The store failed (503).
    #[error(transparent)]
    Sql(#[from] sqlx::Error),
}

pub(crate) fn invalid(why: impl Into<String>) -> ImportError {
    ImportError::Invalid(why.into())
}

/// A line that could not be read, as the import's error.
pub(crate) fn line_error(e: LineError) -> ImportError {
    match e {
        LineError::TooLong(e) => e.into(),
        LineError::NotUtf8 => invalid("every line must be UTF-8"),
        LineError::Io(e) => e.into(),
    }
}

/// The lines of the spooled export `file`, each at most `max_line` bytes.
pub(crate) async fn open(
    file: &Path,
    max_line: usize,
) -> Result<BoundedLines<BufReader<tokio::fs::File>>, ImportError> {
    Ok(BoundedLines::new(BufReader::new(tokio::fs::File::open(file).await?), max_line))
}

/// A database refusal of the file's data (class 22 data exceptions, 23 integrity violations) is
/// the file's fault; anything else is the store's.
pub(crate) fn rejected(e: sqlx::Error, table: &str) -> ImportError {
    match &e {
        sqlx::Error::Database(d) if d.code().is_some_and(|c| c.starts_with("22") || c.starts_with("23")) => {
            invalid(format!("{table}: {d}"))
        }
        _ => ImportError::Sql(e),
    }
}
