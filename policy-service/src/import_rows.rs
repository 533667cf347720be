//! The section rows of an import, batched per section and inserted in the import's transaction
//! (`import_store.rs`); in check mode (the community exists) only compared.

use std::collections::HashMap;

use buzz_core::{CommunityId, Event, Keys, Pubkey, UnsignedEvent};
use serde_json::{Map, Value};
use sqlx::PgConnection;

use crate::export_format::{section_of, Section, SECTIONS};
use crate::import_input::{invalid, rejected, row_of, text, ImportError};
use crate::import_seq::{insert_sql, seq_column};

/// Rows inserted per statement.
const BATCH: usize = 1000;

/// The section rows read so far, batched per section.
pub struct Rows<'k> {
    id: CommunityId,
    /// Only check that the events exist (the community exists already).
    check: bool,
    source_relay: Pubkey,
    relay: &'k Keys,
    /// Old id → new id of the events re-signed by this relay.
    remap: HashMap<String, String>,
    section: usize,
    pending: Vec<Map<String, Value>>,
    /// Rows read per section.
    pub counts: [u64; SECTIONS.len()],
    /// The last audit row's `seq` in the file: they must increase (the log's order).
    last_audit: Option<i64>,
    resigned: u64,
    /// Events of the file this deployment's community lacks (check mode).
    missing: u64,
}

impl<'k> Rows<'k> {
    /// Rows of community `id`, re-signing what `source_relay` signed with `relay`.
    pub fn new(id: CommunityId, check: bool, source_relay: Pubkey, relay: &'k Keys) -> Self {
        Self {
            id,
            check,
            source_relay,
            relay,
            remap: HashMap::new(),
            section: 0,
            pending: Vec::with_capacity(BATCH),
            counts: [0; SECTIONS.len()],
            last_audit: None,
            resigned: 0,
            missing: 0,
        }
    }

    /// Events re-signed by this relay.
    pub fn resigned(&self) -> u64 {
        self.resigned
    }

    /// Events of the file this deployment's community lacks (check mode).
    pub fn missing(&self) -> u64 {
        self.missing
    }

    /// Takes one section line.
    pub async fn push(
        &mut self,
        conn: &mut PgConnection,
        line: Map<String, Value>,
    ) -> Result<(), ImportError> {
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
                if self.last_audit.is_some_and(|last| seq <= last) {
                    return Err(invalid("audit seqs must increase through the file"));
                }
                self.last_audit = Some(seq);
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

    /// Inserts (or in check mode compares) the pending rows.
    pub async fn flush(&mut self, conn: &mut PgConnection) -> Result<(), ImportError> {
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
        let sql = insert_sql(section);
        let done = sqlx::query(&sql).bind(self.id).bind(sqlx::types::Json(&rows)).execute(&mut *conn).await;
        let done = done.map_err(|e| rejected(e, section.table))?;
        // A mapped seq names a value pass 1 read: a row without one means the file changed.
        if seq_column(section.kind).is_some() && done.rows_affected() != rows.len() as u64 {
            return Err(invalid(format!(
                "{}: a seq the first reading of the file did not hold",
                section.table
            )));
        }
        self.pending = rows;
        self.pending.clear();
        Ok(())
    }
}
