//! A validated query and how it is answered: a count (COUNT) or pages of events (REQ, `POST
//! /query`), over NIP-01 filters or one NIP-AR artifact query, streamed in bounded frames.

use std::collections::HashSet;

use buzz_bus::{BusError, ErrorCode, QueryFrameBody};
use buzz_core::{ArtifactForm, ChannelId, EventId, Filter, Limits};
use futures::TryStreamExt;
use sqlx::{PgConnection, Postgres, Transaction};

use crate::artifacts;
use crate::error::sql_error;
use crate::sql::{self, Reader};

/// The artifact query of a request, if it is one: an artifact filter must be the only filter.
/// (Its form was parsed with the filter; an unknown form never gets here.)
pub fn artifact_query(filters: &[Filter]) -> Result<Option<(&Filter, ArtifactForm)>, BusError> {
    match filters {
        [f] => Ok(f.artifact.map(|form| (f, form))),
        many if many.iter().any(|f| f.artifact.is_some()) => Err(BusError::new(
            ErrorCode::Unsupported,
            "an artifact query must be the only filter of its request",
        )),
        _ => Ok(None),
    }
}

/// A validated query inside its transaction.
pub struct Plan<'a> {
    /// Who reads.
    pub reader: Reader<'a>,
    /// The channels the reader may read (artifact queries only; empty otherwise).
    pub readable: Vec<ChannelId>,
    /// The filters that can match anything.
    pub filters: Vec<&'a Filter>,
    /// The artifact query, when the request is one.
    pub artifact: Option<(&'a Filter, ArtifactForm)>,
}

/// `work_mem` of a transaction that runs a NIP-50 search. A frequent word's matches span most of
/// the table's pages; under the default 4 MB the bitmap of them turns lossy and every row of a
/// lossy page has its document recomputed to recheck it (a word in 170,000 of 1,000,000 messages:
/// 6.0 s, over the execution budget; with 32 MB: 0.46 s, docs/design.md "Search (NIP-50)").
pub const SEARCH_WORK_MEM: &str = "32MB";

/// What a transaction that runs a NIP-50 search sets: its [`SEARCH_WORK_MEM`], and a custom plan
/// for each statement. A search's statement is the same text whatever the community and words,
/// and after five executions on a connection PostgreSQL may keep a generic plan, chosen without
/// knowing either: one walked every readable channel and AND-ed each with the words' bitmap from
/// 0003's `events_search`, reading every community's matches once per channel (a phrase in
/// 150,000 messages of another community, 125 readable channels: 1.86 s, over the budget). A
/// custom plan sees the community and the words and takes `events_search_community`.
pub async fn prepare_search(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query(
        "SELECT set_config('work_mem', $1, true), set_config('plan_cache_mode', 'force_custom_plan', true)",
    )
    .bind(SEARCH_WORK_MEM)
    .execute(conn)
    .await
    .map(|_| ())
}

impl Plan<'_> {
    /// For a search, [`prepare_search`] (one more round trip, searches only).
    async fn prepare(&self, tx: &mut Transaction<'static, Postgres>) -> Result<(), BusError> {
        if self.filters.iter().any(|f| f.search.is_some()) {
            prepare_search(tx).await.map_err(sql_error)?;
        }
        Ok(())
    }

    /// COUNT: every match once (page fields do not apply).
    pub async fn count(&self, tx: &mut Transaction<'static, Postgres>) -> Result<QueryFrameBody, BusError> {
        if self.filters.is_empty() {
            return Ok(QueryFrameBody::Count { count: 0 });
        }
        self.prepare(tx).await?;
        let mut qb = match self.artifact {
            Some((f, form)) => artifacts::count(form, &self.reader, &self.readable, f),
            None => sql::count_events(&self.reader, &self.filters),
        };
        let count: i64 = qb.build_query_scalar().fetch_one(&mut **tx).await.map_err(sql_error)?;
        Ok(QueryFrameBody::Count { count: u64::try_from(count).unwrap_or(0) })
    }

    /// REQ: each filter's page, de-duplicated across filters, handed to `emit` in frames; returns
    /// the closing `Done` frame.
    pub async fn page<F, Fut>(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        limits: &Limits,
        emit: &mut F,
    ) -> Result<QueryFrameBody, BusError>
    where
        F: FnMut(QueryFrameBody) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        self.prepare(tx).await?;
        let conn: &mut PgConnection = tx;
        let mut out = Frames::default();
        for f in &self.filters {
            let mut qb = match self.artifact {
                Some((_, form)) => {
                    let limits = &limits.artifacts;
                    let limit = f.limit.unwrap_or(limits.default_limit).min(limits.max_limit);
                    artifacts::select(form, &self.reader, &self.readable, f, limit, f.offset.unwrap_or(0))
                }
                None => sql::select_events(&self.reader, f, f.effective_limit(limits)),
            };
            let mut rows = qb.build_query_as::<(EventId, String)>().fetch(&mut *conn);
            while let Some((id, raw)) = rows.try_next().await.map_err(sql_error)? {
                if let Some(events) = out.push(id, raw) {
                    emit(QueryFrameBody::Events { events }).await;
                }
            }
        }
        if !out.batch.is_empty() {
            emit(QueryFrameBody::Events { events: out.batch }).await;
        }
        Ok(QueryFrameBody::Done { total: out.total })
    }
}

/// Largest frame of events put on the bus (NATS' default payload limit is 1 MiB).
const FRAME_BYTES: usize = 256 * 1024;
const FRAME_EVENTS: usize = 200;

/// Streamed events: de-duplicated across filters, cut into frames of bounded size.
#[derive(Default)]
struct Frames {
    seen: HashSet<EventId>,
    batch: Vec<String>,
    batch_bytes: usize,
    total: u64,
}

impl Frames {
    /// Adds one row; returns a full frame to emit.
    fn push(&mut self, id: EventId, raw: String) -> Option<Vec<String>> {
        if !self.seen.insert(id) {
            return None;
        }
        self.batch_bytes += raw.len();
        self.batch.push(raw);
        self.total += 1;
        if self.batch.len() >= FRAME_EVENTS || self.batch_bytes >= FRAME_BYTES {
            self.batch_bytes = 0;
            return Some(std::mem::take(&mut self.batch));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(v: serde_json::Value) -> Filter {
        Filter::from_value(&v).unwrap()
    }

    #[test]
    fn an_artifact_query_stands_alone() {
        let current = filter(serde_json::json!({"artifact": "current"}));
        let plain = filter(serde_json::json!({"kinds": [9]}));
        let found = artifact_query(std::slice::from_ref(&current)).unwrap();
        assert_eq!(found.map(|(_, form)| form), Some(ArtifactForm::Current));
        assert_eq!(artifact_query(std::slice::from_ref(&plain)).unwrap(), None);
        let mixed = artifact_query(&[plain, current]).unwrap_err();
        assert_eq!(mixed.code, ErrorCode::Unsupported);
    }

    #[test]
    fn frames_drop_repeats_and_close_at_their_event_bound() {
        let mut frames = Frames::default();
        let id = |i: usize| EventId::parse(&format!("{i:064x}")).unwrap();
        assert!(frames.push(id(0), "{}".into()).is_none());
        assert!(frames.push(id(0), "{}".into()).is_none());
        let full = (1..FRAME_EVENTS).find_map(|i| frames.push(id(i), "{}".into()));
        assert_eq!(full.map(|f| f.len()), Some(FRAME_EVENTS));
        assert_eq!(frames.total, FRAME_EVENTS as u64);
    }
}
