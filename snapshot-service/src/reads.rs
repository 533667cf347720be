//! `page`, `bodies` and `complete`: each rechecks database authority. Pages and completion
//! validate the full frozen scope (readable channels unchanged since the capture and every
//! captured entry intact); a body read validates only the requested revisions and their channels.

use buzz_bus::snapshot::{SnapshotCode, SnapshotRequest, LIMITS};
use buzz_core::EventId;

use crate::manifest::{self, Cursor, Entry, Token};
use crate::service::{page_body, Meta, Outcome, Service};
use crate::state::{self, Read};
use crate::store;

const RESET: SnapshotCode = SnapshotCode::SnapshotReset;

impl Service {
    /// Reads a capture this request may use: an unknown, expired or lost capture, and one bound
    /// to another reader or community, are alike a reset (a token grants nothing by itself).
    async fn load(
        &self,
        req: &SnapshotRequest,
        token: Token,
        mark: Option<String>,
        fields: Vec<Vec<u8>>,
    ) -> Result<(Meta, Read), SnapshotCode> {
        let read = self.state.read(token.generation, mark, fields).await?;
        let meta: Meta = serde_json::from_slice(&read.meta).map_err(|_| RESET)?;
        let bound = meta.secret == hex::encode(token.secret)
            && meta.community == req.community_id
            && meta.reader == req.reader.pubkey;
        if !bound {
            return Err(RESET);
        }
        Ok((meta, read))
    }

    /// The whole manifest of a loaded capture (its page fields were read first, in order).
    fn entries(meta: &Meta, read: &Read) -> Result<Vec<Entry>, SnapshotCode> {
        let mut all = Vec::with_capacity(meta.rows);
        for page in read.values.iter().take(meta.pages) {
            all.extend(manifest::unpack(page.as_deref().ok_or(RESET)?)?);
        }
        Ok(all)
    }

    fn page_fields(token: Token, meta_pages: usize) -> Vec<Vec<u8>> {
        (0..meta_pages).map(|n| state::page_field(token.generation, n).into_bytes()).collect()
    }

    /// Full frozen scope: membership, the readable channels (and their rows) as at capture, and
    /// every captured entry intact.
    async fn validate_scope(
        &self,
        req: &SnapshotRequest,
        meta: &Meta,
        entries: &[Entry],
    ) -> Result<(), crate::Failure> {
        let mut tx = store::begin(&self.pool, self.statement_timeout_ms).await?;
        let who = self.admit(req, &mut tx, Some(&meta.as_of)).await?;
        if who.fingerprint != meta.fingerprint {
            return Err(RESET.into());
        }
        if !store::entries_intact(&mut tx, req.community_id, entries, &who.readable).await? {
            return Err(RESET.into());
        }
        Ok(())
    }

    /// The page count of a capture, read with its meta.
    async fn pages_of(&self, req: &SnapshotRequest, token: Token) -> Result<usize, SnapshotCode> {
        let (meta, _) = self.load(req, token, None, Vec::new()).await?;
        Ok(meta.pages)
    }

    pub(crate) async fn page(&self, req: &SnapshotRequest, token: Token, cursor: Cursor) -> Outcome {
        if cursor.generation != token.generation {
            return Err(SnapshotCode::SnapshotInvalid.into());
        }
        let pages = self.pages_of(req, token).await?;
        let n = cursor.page as usize;
        if n >= pages {
            return Err(SnapshotCode::SnapshotInvalid.into());
        }
        let (meta, read) = self.load(req, token, None, Self::page_fields(token, pages)).await?;
        let entries = Self::entries(&meta, &read)?;
        self.validate_scope(req, &meta, &entries).await?;
        // Served only once authority held; a capture lost meanwhile is a reset.
        let (_, marked) = self
            .load(
                req,
                token,
                Some(state::served_field(token.generation, n)),
                vec![state::page_field(token.generation, n).into_bytes()],
            )
            .await?;
        let page = manifest::unpack(marked.values[0].as_deref().ok_or(RESET)?)?;
        Ok(page_body(&token, marked.expires_ms, &page, cursor.page, pages))
    }

    pub(crate) async fn complete(&self, req: &SnapshotRequest, token: Token) -> Outcome {
        let pages = self.pages_of(req, token).await?;
        let mut fields = Self::page_fields(token, pages);
        fields.extend((0..pages).map(|n| state::served_field(token.generation, n).into_bytes()));
        let (meta, read) = self.load(req, token, None, fields).await?;
        // A skipped page: the client fetches it (same cursor rules) and completes again.
        if read.values[pages..].iter().any(Option::is_none) {
            return Err(SnapshotCode::SnapshotInvalid.into());
        }
        let entries = Self::entries(&meta, &read)?;
        self.validate_scope(req, &meta, &entries).await?;
        self.load(req, token, None, Vec::new()).await?;
        Ok(format!("{{\"version\":1,\"token\":\"{}\",\"complete\":true}}", token.encode()))
    }

    pub(crate) async fn bodies(&self, req: &SnapshotRequest, token: Token, revisions: &[EventId]) -> Outcome {
        let wanted: Vec<[u8; 32]> = revisions.iter().map(EventId::to_bytes).collect();
        let fields = wanted.iter().map(|r| state::body_field(token.generation, r)).collect();
        let (_, read) = self.load(req, token, None, fields).await?;
        let mut entries = Vec::with_capacity(wanted.len());
        for (rev, record) in wanted.iter().zip(&read.values) {
            // Only captured revisions: anything else is a wrong request, never a newer body.
            let (d, channel) =
                record.as_deref().and_then(manifest::body_record).ok_or(SnapshotCode::SnapshotInvalid)?;
            entries.push(Entry { d, revision: *rev, channel });
        }
        let mut tx = store::begin(&self.pool, self.statement_timeout_ms).await?;
        let who = self.admit(req, &mut tx, None).await?;
        if !store::entries_intact(&mut tx, req.community_id, &entries, &who.readable).await? {
            return Err(RESET.into());
        }
        let found = store::bodies(&mut tx, req.community_id, revisions).await?;
        drop(tx);
        let events = in_order(revisions, found)?;
        self.load(req, token, None, Vec::new()).await?;
        Ok(format!("{{\"version\":1,\"token\":\"{}\",\"events\":[{}]}}", token.encode(), events.join(",")))
    }
}

/// The bodies in the requested order, within `bodyBytes` (a single body above it fails too).
fn in_order(revisions: &[EventId], found: Vec<(EventId, String)>) -> Result<Vec<String>, crate::Failure> {
    let mut by_id: std::collections::HashMap<EventId, String> = found.into_iter().collect();
    let mut total = 0usize;
    let mut out = Vec::with_capacity(revisions.len());
    for r in revisions {
        let raw = by_id.remove(r).ok_or(RESET)?;
        total += raw.len();
        if total > LIMITS.body_bytes {
            return Err(SnapshotCode::SnapshotLimit.into());
        }
        out.push(raw);
    }
    Ok(out)
}
