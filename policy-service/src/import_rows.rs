//! The section rows of an import, batched per section and inserted in the import's transaction
//! (`import_store.rs`); in check mode (the community exists) only compared.

use buzz_core::{CommunityId, Event};
use serde_json::{Map, Value};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::export_format::{section_of, Section, SECTIONS};
use crate::import_input::{invalid, rejected, row_of, text, ImportError};
use crate::import_relay::{Derived, Deriver};
use crate::import_seq::seq_column;
use crate::import_sql::{insert_sql, INSERT_DERIVED_TAGS, INSERT_RELAY_IDS};

/// Rows inserted per statement.
const BATCH: usize = 1000;

/// The section rows read so far, batched per section.
pub struct Rows<'k> {
    id: CommunityId,
    /// Only check that the events exist (the community exists already).
    check: bool,
    /// Derives the relay's own events in place of the file's.
    derive: Deriver<'k>,
    section: usize,
    pending: Vec<Map<String, Value>>,
    /// The events of `pending` this relay derived.
    derived: Vec<Derived>,
    /// Rows read per section.
    pub counts: [u64; SECTIONS.len()],
    /// The last audit row's `seq` in the file: they must increase (the log's order).
    last_audit: Option<i64>,
    resigned: u64,
    /// Events of the file this deployment's community lacks (check mode).
    missing: u64,
}

impl<'k> Rows<'k> {
    /// Rows of community `id`, the relay's own events derived by `derive`.
    pub fn new(id: CommunityId, check: bool, derive: Deriver<'k>) -> Self {
        Self {
            id,
            check,
            derive,
            section: 0,
            pending: Vec::with_capacity(BATCH),
            derived: Vec::new(),
            counts: [0; SECTIONS.len()],
            last_audit: None,
            resigned: 0,
            missing: 0,
        }
    }

    /// Events this relay derived whose id differs from the file's.
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
            "event" => self.event(conn, &mut row).await?,
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

    /// Verifies an event row, and puts in its place the event this relay derives for it, if any.
    async fn event(
        &mut self,
        conn: &mut PgConnection,
        row: &mut Map<String, Value>,
    ) -> Result<(), ImportError> {
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
        let channel =
            match row.get("channel_id") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_str().and_then(|c| c.parse::<Uuid>().ok()).ok_or_else(|| {
                    invalid(format!("event {}: channel_id must be a UUID", event.id.as_str()))
                })?),
            };
        let Some(derived) = self.derive.derive(conn, self.id, &event, channel).await? else { return Ok(()) };
        row.insert("id".into(), derived.event.id.as_str().into());
        row.insert("pubkey".into(), derived.event.pubkey.as_str().into());
        row.insert("raw".into(), derived.event.to_json().into());
        if derived.event.id.as_str() != derived.old {
            self.resigned += 1;
        }
        self.derived.push(derived);
        Ok(())
    }

    /// Inserts (or in check mode compares) the pending rows.
    pub async fn flush(&mut self, conn: &mut PgConnection) -> Result<(), ImportError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let section: &Section = &SECTIONS[self.section];
        let rows = std::mem::take(&mut self.pending);
        if self.check {
            self.derived.clear();
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
        let mut query = sqlx::query(&sql).bind(self.id).bind(sqlx::types::Json(&rows));
        if section.kind == "event_tag" {
            query = query.bind(self.derive.relay_pubkey());
        }
        let done = query.execute(&mut *conn).await;
        let done = done.map_err(|e| rejected(e, section.table))?;
        // A mapped seq names a value pass 1 read: a row without one means the file changed.
        if seq_column(section.kind).is_some() && done.rows_affected() != rows.len() as u64 {
            return Err(invalid(format!(
                "{}: a seq the first reading of the file did not hold",
                section.table
            )));
        }
        if section.kind == "event" {
            self.store_derived(conn).await?;
        }
        self.pending = rows;
        self.pending.clear();
        Ok(())
    }

    /// Records the derived events of the batch just stored (`import_relay_ids`) with their tag
    /// rows; a second claim of one slot (two 39002 for a channel) is refused.
    async fn store_derived(&mut self, conn: &mut PgConnection) -> Result<(), ImportError> {
        let derived = std::mem::take(&mut self.derived);
        if derived.is_empty() {
            return Ok(());
        }
        let (mut old, mut new, mut kinds, mut slots) = (vec![], vec![], vec![], vec![]);
        let (mut d, mut h, mut e) = (vec![], vec![], vec![]);
        let (mut tag_ids, mut names, mut hashes, mut times) = (vec![], vec![], vec![], vec![]);
        for x in &derived {
            for (name, hash) in buzz_store::tag_rows::event_tag_rows(&x.event) {
                tag_ids.push(x.event.id.as_str());
                names.push(name);
                hashes.push(hash);
                times.push(x.event.created_at);
            }
            old.push(x.old.as_str());
            new.push(x.event.id.as_str());
            kinds.push(i64::from(x.event.kind));
            slots.push(x.slot.as_str());
            d.push(x.removal.as_ref().map(|r| r.0));
            h.push(x.removal.as_ref().map(|r| r.1));
            e.push(x.removal.as_ref().map(|r| r.2.as_str()));
        }
        let done = sqlx::query(INSERT_RELAY_IDS)
            .bind(&old)
            .bind(&new)
            .bind(&kinds)
            .bind(&slots)
            .bind(&d)
            .bind(&h)
            .bind(&e)
            .execute(&mut *conn)
            .await;
        if let Err(sqlx::Error::Database(db)) = &done {
            if db.is_unique_violation() {
                return Err(invalid(
                    "a channel's 39000 or 39002, or a move's 45011, appears twice: the relay keeps one",
                ));
            }
        }
        done?;
        sqlx::query(INSERT_DERIVED_TAGS)
            .bind(self.id)
            .bind(&tag_ids)
            .bind(&names)
            .bind(&hashes)
            .bind(&times)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
