//! Fresh acceptance numbers for an import (issue 37 item 1): the file's `seq` values are never
//! stored; every imported row takes a number from this deployment's own sequences, in the file's
//! order, so a file can neither exhaust a sequence nor move it for other communities.
//!
//! `events.seq` is named by other rows: `artifact_revisions.accepted_seq`, `read_markers.seq` and
//! `mentions.seq`, some of them naming an event retention has removed since. So a first pass over
//! the spooled file gathers every value those four columns hold into a temporary table, and each
//! distinct value gets one new number from the `events.seq` sequence, in the values' order
//! ([`import_seq`]); the import then stores each row with the new number of its value. Equal
//! values stay equal and order is kept exactly, links to vanished events included, whatever the
//! file's numbers were. Audit rows are named by nothing: each takes the next number of the
//! `community_audit` identity in the file's order ([`AUDIT_SEQ`]).
//!
//! Memory stays bounded: values go to PostgreSQL [`CHUNK`] at a time, and the map lives in the
//! import's transaction (`ON COMMIT DROP`).

use sqlx::PgConnection;
use tokio::io::AsyncBufRead;

use crate::portability::format::SECTIONS;
use crate::portability::import::input::{invalid, line_error, ImportError};
use crate::portability::import::json::{self, Line};
use crate::portability::import::lines::BoundedLines;

/// Values sent per statement.
const CHUNK: usize = 65_536;

/// The column of each section whose values are `events.seq` numbers.
#[must_use]
pub fn seq_column(section: &str) -> Option<&'static str> {
    match section {
        "event" | "read_marker" | "mention" => Some("seq"),
        "revision" => Some("accepted_seq"),
        _ => None,
    }
}

/// Pass 1: reads `lines` (the whole file again) and fills the temporary table `import_seq` (old
/// value → new number) for every value of a [`seq_column`]. Every section line is read as the
/// second reading reads it (an unknown name is refused here, before a row is written). Event seqs
/// must increase, as an export writes them. Answers the number of distinct values.
pub async fn import_seq<R: AsyncBufRead + Unpin>(
    conn: &mut PgConnection,
    mut lines: BoundedLines<R>,
) -> Result<u64, ImportError> {
    for sql in [
        "CREATE TEMPORARY TABLE import_seq_old (old bigint NOT NULL) ON COMMIT DROP",
        "CREATE TEMPORARY TABLE import_seq (old bigint PRIMARY KEY, new bigint NOT NULL) ON COMMIT DROP",
    ] {
        sqlx::query(sql).execute(&mut *conn).await?;
    }
    let mut values: Vec<i64> = Vec::with_capacity(CHUNK);
    let mut last_event = None;
    // The header and community lines: the second reading checks them.
    for _ in 0..2 {
        lines.next_line().await.map_err(line_error)?;
    }
    while let Some(text) = lines.next_line().await.map_err(line_error)? {
        let (section, row) = match json::line(text)? {
            Line::End(_) => break,
            Line::Row { section, row } => (SECTIONS[section].kind, row),
        };
        let Some(column) = seq_column(section) else { continue };
        let value: i64 = row.parse(column, "an integer")?;
        if section == "event" {
            if last_event.is_some_and(|last| value <= last) {
                return Err(invalid("event seqs must increase through the file"));
            }
            last_event = Some(value);
        }
        values.push(value);
        if values.len() == CHUNK {
            send(conn, &mut values).await?;
        }
    }
    send(conn, &mut values).await?;
    let mapped = sqlx::query(
        "WITH d AS MATERIALIZED (SELECT DISTINCT old FROM import_seq_old), \
              o AS (SELECT old, row_number() OVER (ORDER BY old) AS rank FROM d), \
              n AS (SELECT new, row_number() OVER (ORDER BY new) AS rank FROM ( \
                    SELECT nextval(pg_get_serial_sequence('events', 'seq')::regclass) AS new FROM d) x) \
         INSERT INTO import_seq (old, new) SELECT o.old, n.new FROM o JOIN n USING (rank)",
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    sqlx::query("DROP TABLE import_seq_old").execute(&mut *conn).await?;
    Ok(mapped)
}

async fn send(conn: &mut PgConnection, values: &mut Vec<i64>) -> Result<(), ImportError> {
    if !values.is_empty() {
        sqlx::query("INSERT INTO import_seq_old (old) SELECT unnest($1::bigint[])")
            .bind(&*values)
            .execute(&mut *conn)
            .await?;
        values.clear();
    }
    Ok(())
}
