//! The section rows of an import, batched per section and inserted in the import's transaction
//! (`store.rs`); in check mode (the community exists) only compared.
//!
//! A batch is the rows' own JSON text in an array, sent as one statement's parameter: it flushes
//! at [`BATCH_BYTES`] or [`BATCH_ROWS`], whichever comes first, so the rows held never exceed
//! that and one line ([`crate::portability::import::json`] reads them without a JSON tree).

use buzz_core::{CommunityId, Event};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::portability::format::{Section, SECTIONS};
use crate::portability::import::input::{invalid, rejected, ImportError};
use crate::portability::import::json::{tag_cost, Row};
use crate::portability::import::relay::{Derived, Deriver};
use crate::portability::import::seq::seq_column;
use crate::portability::import::sql::{insert_sql, INSERT_DERIVED_TAGS, INSERT_RELAY_IDS};

/// A batch is sent once its text reaches this many bytes.
pub const BATCH_BYTES: usize = 4 << 20;
/// Rows inserted per statement at most.
pub const BATCH_ROWS: usize = 1000;

/// The section rows read so far, batched per section.
pub struct Rows<'k> {
    id: CommunityId,
    /// Only check that the events exist (the community exists already).
    check: bool,
    /// Derives the relay's own events in place of the file's.
    derive: Deriver<'k>,
    /// The most memory an event's tags may take once parsed: four lines.
    max_tag_bytes: usize,
    section: usize,
    /// The batch: `[` and its rows' JSON text, separated by `,` (empty in check mode).
    batch: String,
    /// Rows in the batch.
    rows: usize,
    /// The event ids of the batch (check mode).
    ids: Vec<String>,
    /// The events of the batch this relay derived.
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
    /// Rows of community `id` from lines of at most `max_line` bytes, the relay's own events
    /// derived by `derive`.
    pub fn new(id: CommunityId, check: bool, derive: Deriver<'k>, max_line: usize) -> Self {
        Self {
            id,
            check,
            derive,
            max_tag_bytes: max_line.saturating_mul(4),
            section: 0,
            batch: String::new(),
            rows: 0,
            ids: Vec::new(),
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

    /// Takes one row of section `SECTIONS[index]`.
    pub async fn push(
        &mut self,
        conn: &mut PgConnection,
        index: usize,
        row: &Row<'_>,
    ) -> Result<(), ImportError> {
        let kind = SECTIONS[index].kind;
        if index < self.section {
            return Err(invalid(format!("{kind} lines come before {} lines", SECTIONS[self.section].kind)));
        }
        if index != self.section {
            self.flush(conn).await?;
            self.section = index;
        }
        self.batch.push(if self.rows == 0 { '[' } else { ',' });
        match kind {
            "event" => self.event(conn, row).await?,
            "audit" => {
                let seq: i64 = row.parse("seq", "an integer")?;
                if self.last_audit.is_some_and(|last| seq <= last) {
                    return Err(invalid("audit seqs must increase through the file"));
                }
                self.last_audit = Some(seq);
                self.batch.push_str(row.text());
            }
            _ => self.batch.push_str(row.text()),
        }
        self.counts[index] += 1;
        self.rows += 1;
        if self.batch.len() >= BATCH_BYTES || self.rows >= BATCH_ROWS {
            self.flush(conn).await?;
        }
        Ok(())
    }

    /// Verifies an event row and adds it to the batch, or in its place the event this relay
    /// derives for it.
    async fn event(&mut self, conn: &mut PgConnection, row: &Row<'_>) -> Result<(), ImportError> {
        let raw = row.str("raw")?;
        // Tags in an `Event` take far more memory than their JSON when they are many and short:
        // refused past a few lines' worth (docs/design.md, Limits).
        let cost = tag_cost(&raw).ok_or_else(|| invalid("event raw: not an event with tags"))?;
        if cost > self.max_tag_bytes {
            return Err(invalid(format!(
                "event raw: its tags would take {cost} bytes in memory, more than {} (4 lines)",
                self.max_tag_bytes
            )));
        }
        let event: Event = serde_json::from_str(&raw).map_err(|e| invalid(format!("event raw: {e}")))?;
        drop(raw);
        let id = event.id.as_str();
        event.verify().map_err(|e| invalid(format!("event {id}: {e}")))?;
        let agrees = row.str("id")? == id
            && row.str("pubkey")? == event.pubkey.as_str()
            && row.parse::<u64>("kind", "an integer")? == u64::from(event.kind)
            && row.parse::<i64>("created_at", "an integer")? == event.created_at;
        if !agrees {
            return Err(invalid(format!("event {id}: its columns differ from its JSON")));
        }
        let channel: Option<Uuid> = row.parse("channel_id", "a UUID or null")?;
        let derived = self.derive.derive(conn, self.id, &event, channel).await?;
        let Some(derived) = derived else {
            if self.check {
                self.ids.push(id.to_owned());
            } else {
                self.batch.push_str(row.text());
            }
            return Ok(());
        };
        let new = &derived.event;
        if self.check {
            self.ids.push(new.id.as_str().to_owned());
        } else {
            let raw = serde_json::to_string(&new.to_json()).map_err(|e| invalid(e.to_string()))?;
            for (i, (column, value)) in row.columns().iter().enumerate() {
                self.batch.push_str(if i == 0 { "{\"" } else { ",\"" });
                self.batch.push_str(column);
                self.batch.push_str("\":");
                match *column {
                    "id" => self.batch.push_str(&format!("\"{}\"", new.id.as_str())),
                    "pubkey" => self.batch.push_str(&format!("\"{}\"", new.pubkey.as_str())),
                    "raw" => self.batch.push_str(&raw),
                    _ => self.batch.push_str(value.get()),
                }
            }
            self.batch.push('}');
        }
        if new.id.as_str() != derived.old {
            self.resigned += 1;
        }
        self.derived.push(derived);
        Ok(())
    }

    /// Inserts (or in check mode compares) the batch.
    pub async fn flush(&mut self, conn: &mut PgConnection) -> Result<(), ImportError> {
        if self.rows == 0 {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.rows);
        let section: &Section = &SECTIONS[self.section];
        if self.check {
            self.derived.clear();
            self.batch.clear();
            if section.kind == "event" {
                let found: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM events WHERE community_id = $1 AND id = ANY($2)",
                )
                .bind(self.id)
                .bind(&self.ids)
                .fetch_one(&mut *conn)
                .await?;
                self.missing += (rows as u64).saturating_sub(u64::try_from(found).unwrap_or(0));
                self.ids.clear();
            }
            return Ok(());
        }
        self.batch.push(']');
        let sql = insert_sql(section);
        let mut query = sqlx::query(&sql).bind(self.id).bind(self.batch.as_str());
        if section.kind == "event_tag" {
            query = query.bind(self.derive.relay_pubkey());
        }
        let done = query.execute(&mut *conn).await.map_err(|e| rejected(e, section.table))?;
        self.batch.clear();
        // A mapped seq names a value pass 1 read: a row without one means the file changed.
        if seq_column(section.kind).is_some() && done.rows_affected() != rows as u64 {
            return Err(invalid(format!(
                "{}: a seq the first reading of the file did not hold",
                section.table
            )));
        }
        if section.kind == "event" {
            self.store_derived(conn).await?;
        }
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
