//! The import transaction: an exported community ([`crate::export_format`]) recreated in this
//! deployment in one transaction, batch by batch, so a failed import leaves nothing behind.
//!
//! - Every event's id and signature are verified, and its columns must agree with its JSON.
//! - Events keep their `seq` (acceptance order), and so do the revision records, read markers and
//!   mentions that name it, so revision order, compare-and-swap history and unread counts are
//!   the source's exactly; the `events.seq` sequence is then raised past the imported ones, so
//!   later events are accepted after them.
//! - Events the source relay signed (39000/39002 channel state, 45011 removals) are re-signed
//!   by this relay's key unless it is the same key (docs/design.md "Community export and
//!   import" says why); their new ids replace the old ones in tag rows, read markers and mentions.
//! - NIP-86 rows (bans, event bans, the audit log) are restored as they were; audit rows keep
//!   their `seq` and the identity is raised past them. An export without those sections imports.
//! - A community id that exists already is a conflict, unless it holds this export already (same
//!   host and owner and exactly the export's events): then nothing changes and the answer says
//!   `imported: false`. A host bound to another community is a conflict.

use std::collections::HashMap;

use buzz_core::{CommunityId, Event, Keys, Pubkey, UnsignedEvent};
use serde_json::{Map, Value};
use sqlx::{PgConnection, PgPool};
use tokio::io::AsyncBufRead;

use crate::export_format::{counts_agree, section_of, Section, COMMUNITY_COLUMNS, FORMAT, SECTIONS, VERSION};
use crate::import_lines::{BoundedLines, LineError, LineTooLong};

/// Rows inserted per statement.
const BATCH: usize = 1000;

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

fn invalid(why: impl Into<String>) -> ImportError {
    ImportError::Invalid(why.into())
}

/// What an import did.
#[derive(Debug, serde::Serialize)]
pub struct Imported {
    /// The community.
    pub community_id: CommunityId,
    /// The host it is bound to here.
    pub host: String,
    /// False when this deployment held the export already (nothing was written).
    pub imported: bool,
    /// Events re-signed by this relay's key.
    pub resigned: u64,
    /// Rows per section.
    pub counts: Map<String, Value>,
}

/// Reads the next line as a JSON object of type `want` (any type when `None`); `None` at the end.
async fn next_line<R: AsyncBufRead + Unpin>(
    lines: &mut BoundedLines<R>,
) -> Result<Option<Map<String, Value>>, ImportError> {
    let line = match lines.next_line().await {
        Ok(Some(line)) => line,
        Ok(None) => return Ok(None),
        Err(LineError::TooLong(e)) => return Err(e.into()),
        Err(LineError::NotUtf8) => return Err(invalid("every line must be UTF-8")),
        Err(LineError::Io(e)) => return Err(e.into()),
    };
    match serde_json::from_str::<Value>(&line) {
        Ok(Value::Object(map)) if map.get("type").is_some_and(Value::is_string) => Ok(Some(map)),
        _ => Err(invalid("every line must be a JSON object with a string \"type\"")),
    }
}

/// The `row` object of a section line.
fn row_of(mut line: Map<String, Value>) -> Result<Map<String, Value>, ImportError> {
    match line.remove("row") {
        Some(Value::Object(row)) => Ok(row),
        _ => Err(invalid("a row line must carry its columns in an object \"row\"")),
    }
}

fn text<'m>(map: &'m Map<String, Value>, field: &str) -> Result<&'m str, ImportError> {
    map.get(field).and_then(Value::as_str).ok_or_else(|| invalid(format!("{field} must be a string")))
}

/// Imports the export `reader` holds, its lines at most `max_line` bytes; `host` replaces the
/// exported host.
pub async fn import<R: AsyncBufRead + Unpin>(
    pool: &PgPool,
    relay: &Keys,
    host: Option<&str>,
    (reader, max_line): (R, usize),
) -> Result<Imported, ImportError> {
    let mut lines = BoundedLines::new(reader, max_line);
    let header = next_line(&mut lines).await?.ok_or_else(|| invalid("the file is empty"))?;
    if text(&header, "type")? != "header" || text(&header, "format")? != FORMAT {
        return Err(invalid(format!("the first line must be the {FORMAT} header")));
    }
    if header.get("version").and_then(Value::as_u64) != Some(VERSION) {
        return Err(invalid(format!("only version {VERSION} of the format is read")));
    }
    let source_relay =
        Pubkey::parse(text(&header, "relay_pubkey")?).map_err(|_| invalid("relay_pubkey must be 64 hex"))?;
    let community = next_line(&mut lines).await?.filter(|c| c.get("type") == Some(&"community".into()));
    let community = community.map(row_of).transpose()?;
    let community = community.ok_or_else(|| invalid("the second line must be the community"))?;
    let id =
        CommunityId::parse(text(&community, "id")?).map_err(|_| invalid("the community id is not a UUID"))?;
    let host = buzz_core::host::community_host(host.unwrap_or(text(&community, "host")?))
        .map_err(|e| invalid(e.to_string()))?;
    let owner = text(&community, "owner_pubkey")?.to_owned();
    // No lock: the new row is invisible (and its host unleased) until the commit, and a rerun's
    // check only reads, so neither holds back leases, writes or operator calls meanwhile.
    let mut tx = pool.begin().await?;
    let existing: Option<(String, String)> =
        sqlx::query_as("SELECT host, owner_pubkey FROM communities WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let check = match existing {
        None => {
            insert_community(&mut tx, &community, &host).await?;
            false
        }
        Some((h, o)) if h == host && o == owner => true,
        Some(_) => return Err(ImportError::CommunityConflict),
    };
    let mut rows = Rows::new(id, check, source_relay, relay);
    let end = loop {
        let line =
            next_line(&mut lines).await?.ok_or_else(|| invalid("the file ends without its end line"))?;
        if text(&line, "type")? == "end" {
            break line;
        }
        rows.push(&mut tx, line).await?;
    };
    rows.flush(&mut tx).await?;
    if next_line(&mut lines).await?.is_some() {
        return Err(invalid("nothing may follow the end line"));
    }
    let counts: Map<String, Value> =
        SECTIONS.iter().zip(rows.counts).map(|(s, n)| (s.kind.to_owned(), n.into())).collect();
    if !counts_agree(end.get("counts"), &counts) {
        return Err(invalid("the end line's counts differ from the rows read: the file is incomplete"));
    }
    let imported = Imported { community_id: id, host, imported: !check, resigned: rows.resigned, counts };
    if check {
        let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE community_id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        let exported = rows.counts[event_section()];
        if rows.missing > 0 || u64::try_from(stored).ok() != Some(exported) {
            return Err(ImportError::CommunityConflict);
        }
        tx.rollback().await?;
        return Ok(imported);
    }
    // Later events must be accepted after the imported ones (setval only ever raises it here).
    sqlx::query(
        "SELECT setval(s, $1) FROM (SELECT pg_get_serial_sequence('events', 'seq') AS s) q \
         WHERE $1 > COALESCE(pg_sequence_last_value(s::regclass), 0)",
    )
    .bind(rows.max_seq)
    .execute(&mut *tx)
    .await?;
    if rows.max_audit_seq > 0 {
        // Imported audit rows keep their seq; the identity goes on after them.
        sqlx::query(
            "SELECT setval(s, $1) FROM (SELECT pg_get_serial_sequence('community_audit', 'seq') AS s) q \
             WHERE $1 > COALESCE(pg_sequence_last_value(s::regclass), 0)",
        )
        .bind(rows.max_audit_seq)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(imported)
}

fn event_section() -> usize {
    section_of("event").map_or(0, |(i, _)| i)
}

async fn insert_community(
    conn: &mut PgConnection,
    community: &Map<String, Value>,
    host: &str,
) -> Result<(), ImportError> {
    let columns = COMMUNITY_COLUMNS.replace("host,", "$2,");
    let sql = format!(
        "INSERT INTO communities ({COMMUNITY_COLUMNS}) SELECT {columns} \
         FROM jsonb_populate_record(NULL::communities, $1::jsonb)"
    );
    let done = sqlx::query(&sql).bind(sqlx::types::Json(community)).bind(host).execute(conn).await;
    match done {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.constraint() == Some("communities_host_key") => {
            Err(ImportError::HostConflict)
        }
        // A concurrent import of the same id committed first.
        Err(sqlx::Error::Database(e)) if e.constraint() == Some("communities_pkey") => {
            Err(ImportError::CommunityConflict)
        }
        Err(e) => Err(rejected(e, "communities")),
    }
}

/// A database refusal of the file's data (class 22 data exceptions, 23 integrity violations) is
/// the file's fault; anything else is the store's.
fn rejected(e: sqlx::Error, table: &str) -> ImportError {
    match &e {
        sqlx::Error::Database(d) if d.code().is_some_and(|c| c.starts_with("22") || c.starts_with("23")) => {
            invalid(format!("{table}: {d}"))
        }
        _ => ImportError::Sql(e),
    }
}

/// The section rows read so far, batched per section.
struct Rows<'k> {
    id: CommunityId,
    /// Only check that the events exist (the community exists already).
    check: bool,
    source_relay: Pubkey,
    relay: &'k Keys,
    /// Old id → new id of the events re-signed by this relay.
    remap: HashMap<String, String>,
    section: usize,
    pending: Vec<Map<String, Value>>,
    counts: [u64; SECTIONS.len()],
    max_seq: i64,
    /// The highest imported `community_audit.seq`.
    max_audit_seq: i64,
    resigned: u64,
    /// Events of the file this deployment's community lacks (check mode).
    missing: u64,
}

impl<'k> Rows<'k> {
    fn new(id: CommunityId, check: bool, source_relay: Pubkey, relay: &'k Keys) -> Self {
        Self {
            id,
            check,
            source_relay,
            relay,
            remap: HashMap::new(),
            section: 0,
            pending: Vec::with_capacity(BATCH),
            counts: [0; SECTIONS.len()],
            max_seq: 0,
            max_audit_seq: 0,
            resigned: 0,
            missing: 0,
        }
    }

    async fn push(&mut self, conn: &mut PgConnection, line: Map<String, Value>) -> Result<(), ImportError> {
        let kind = text(&line, "type")?;
        let (index, section) =
            section_of(kind).ok_or_else(|| invalid(format!("unknown line type {kind:?}")))?;
        let kind = section.kind;
        let mut row = row_of(line)?;
        if index < self.section {
            return Err(invalid(format!("{kind} lines come before {} lines", SECTIONS[self.section].kind)));
        }
        if index != self.section {
            self.flush(conn).await?;
            self.section = index;
        }
        match section.kind {
            "event" => self.event(&mut row)?,
            "event_tag" | "read_marker" | "mention" | "event_ban" => self.rename(&mut row, "event_id"),
            "audit" => {
                let seq = row.get("seq").and_then(Value::as_i64);
                let seq = seq.ok_or_else(|| invalid("audit seq must be an integer"))?;
                self.max_audit_seq = self.max_audit_seq.max(seq);
            }
            _ => {}
        }
        self.counts[index] += 1;
        self.pending.push(row);
        if self.pending.len() >= BATCH {
            self.flush(conn).await?;
        }
        Ok(())
    }

    /// Verifies an event row, and re-signs it when the source relay signed it.
    fn event(&mut self, row: &mut Map<String, Value>) -> Result<(), ImportError> {
        let event: Event =
            serde_json::from_str(text(row, "raw")?).map_err(|e| invalid(format!("event raw: {e}")))?;
        event.verify().map_err(|e| invalid(format!("event {}: {e}", event.id.as_str())))?;
        let agrees = row.get("id").and_then(Value::as_str) == Some(event.id.as_str())
            && row.get("pubkey").and_then(Value::as_str) == Some(event.pubkey.as_str())
            && row.get("kind").and_then(Value::as_u64) == Some(u64::from(event.kind))
            && row.get("created_at").and_then(Value::as_i64) == Some(event.created_at);
        if !agrees {
            return Err(invalid(format!("event {}: its columns differ from its JSON", event.id.as_str())));
        }
        let seq =
            row.get("seq").and_then(Value::as_i64).ok_or_else(|| invalid("event seq must be an integer"))?;
        self.max_seq = self.max_seq.max(seq);
        if event.pubkey == self.source_relay && self.source_relay != self.relay.pubkey() {
            let signed = self.relay.sign(UnsignedEvent {
                pubkey: self.relay.public_hex(),
                created_at: event.created_at,
                kind: event.kind,
                tags: event.tags,
                content: event.content,
            });
            self.remap.insert(event.id.as_str().to_owned(), signed.id.as_str().to_owned());
            row.insert("id".into(), signed.id.as_str().into());
            row.insert("pubkey".into(), signed.pubkey.as_str().into());
            row.insert("raw".into(), signed.to_json().into());
            self.resigned += 1;
        }
        Ok(())
    }

    /// Replaces the id of a re-signed event in `field`.
    fn rename(&self, row: &mut Map<String, Value>, field: &str) {
        let new = row.get(field).and_then(Value::as_str).and_then(|old| self.remap.get(old));
        if let Some(new) = new.cloned() {
            row.insert(field.to_owned(), new.into());
        }
    }

    async fn flush(&mut self, conn: &mut PgConnection) -> Result<(), ImportError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let section: &Section = &SECTIONS[self.section];
        let rows = std::mem::take(&mut self.pending);
        if self.check {
            if section.kind == "event" {
                let ids: Vec<&str> =
                    rows.iter().filter_map(|r| r.get("id").and_then(Value::as_str)).collect();
                let found: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM events WHERE community_id = $1 AND id = ANY($2)",
                )
                .bind(self.id)
                .bind(&ids)
                .fetch_one(&mut *conn)
                .await?;
                self.missing += (rows.len() as u64).saturating_sub(u64::try_from(found).unwrap_or(0));
            }
            return Ok(());
        }
        let overriding =
            if matches!(section.kind, "event" | "audit") { "OVERRIDING SYSTEM VALUE" } else { "" };
        let sql = format!(
            "INSERT INTO {table} (community_id, {cols}) {overriding} SELECT $1, {cols} \
             FROM jsonb_populate_recordset(NULL::{table}, $2::jsonb)",
            table = section.table,
            cols = section.columns,
        );
        let done = sqlx::query(&sql).bind(self.id).bind(sqlx::types::Json(&rows)).execute(&mut *conn).await;
        done.map_err(|e| rejected(e, section.table))?;
        self.pending = rows;
        self.pending.clear();
        Ok(())
    }
}
