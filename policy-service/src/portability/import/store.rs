//! The import transaction: an exported community ([`crate::portability::format`]) recreated in this
//! deployment in one transaction, batch by batch ([`crate::portability::import::rows`]), so a failed import
//! leaves nothing behind.
//!
//! - Every event's id and signature are verified, and its columns must agree with its JSON.
//! - No number of the file is stored: events, revision records, read markers and mentions take
//!   new numbers from this deployment's `events.seq` sequence, audit rows from their identity, in
//!   the file's order ([`crate::portability::import::seq`]), so the order of acceptance, compare-and-swap history
//!   and unread counts are the source's exactly and later events are accepted after them.
//! - The relay's own events (39000/39002 channel state, 45011 removals) are derived again and
//!   signed by this relay ([`crate::portability::import::relay`]); nothing else by a relay key is accepted.
//! - Lines are read in place and rows batched as their own text, up to
//!   [`crate::portability::import::rows::BATCH_BYTES`] a statement, so memory stays bounded whatever the file
//!   holds ([`crate::portability::import::json`]); a name a section does not have is refused.
//! - NIP-86 rows (bans, event bans, the audit log) are restored as they were, the audit log in its
//!   order. An export without those sections imports.
//! - A community id that exists already is a conflict, unless it holds this export already (same
//!   host and owner and exactly the export's events): then nothing changes and the answer says
//!   `imported: false`. A host bound to another community is a conflict.

use std::path::Path;

use std::borrow::Cow;

use buzz_core::{CommunityId, Keys, Pubkey};
use serde_json::{Map, Value};
use sqlx::{PgConnection, PgPool};

use crate::portability::format::{counts_agree, section_of, COMMUNITY_COLUMNS, FORMAT, SECTIONS, VERSION};
pub use crate::portability::import::input::ImportError;
use crate::portability::import::input::{invalid, line_error, open, rejected};
use crate::portability::import::json::{self, Line, Row};
use crate::portability::import::relay::Deriver;
use crate::portability::import::rows::Rows;
use crate::portability::import::sql::{CREATE_RELAY_IDS, UNRECORDED_REMOVAL};

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

/// Imports the export in `file` (read twice: [`crate::portability::import::seq`]), its lines at most
/// `max_line` bytes; `host` replaces the exported host.
pub async fn import(
    pool: &PgPool,
    relay: &Keys,
    host: Option<&str>,
    (file, max_line): (&Path, usize),
) -> Result<Imported, ImportError> {
    let mut lines = open(file, max_line).await?;
    let text = lines.next_line().await.map_err(line_error)?.ok_or_else(|| invalid("the file is empty"))?;
    let source_relay = header(text)?;
    let text = lines.next_line().await.map_err(line_error)?;
    let text = text.ok_or_else(|| invalid("the second line must be the community"))?;
    let community = json::typed_row(text, "community", &json::names(COMMUNITY_COLUMNS))?;
    let id =
        CommunityId::parse(&community.str("id")?).map_err(|_| invalid("the community id is not a UUID"))?;
    let host = buzz_core::host::community_host(host.unwrap_or(&community.str("host")?))
        .map_err(|e| invalid(e.to_string()))?;
    let owner = community.str("owner_pubkey")?.into_owned();
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
    if !check {
        crate::portability::import::seq::import_seq(&mut tx, open(file, max_line).await?).await?;
        sqlx::query(CREATE_RELAY_IDS).execute(&mut *tx).await?;
    }
    let mut rows = Rows::new(id, check, Deriver::new(relay, source_relay, max_line), max_line);
    let end = loop {
        let text = lines.next_line().await.map_err(line_error)?;
        match json::line(text.ok_or_else(|| invalid("the file ends without its end line"))?)? {
            Line::End(counts) => break counts,
            Line::Row { section, row } => rows.push(&mut tx, section, &row).await?,
        }
    };
    rows.flush(&mut tx).await?;
    if lines.next_line().await.map_err(line_error)?.is_some() {
        return Err(invalid("nothing may follow the end line"));
    }
    if !counts_agree(&end, &rows.counts) {
        return Err(invalid("the end line's counts differ from the rows read: the file is incomplete"));
    }
    let counts: Map<String, Value> =
        SECTIONS.iter().zip(rows.counts).map(|(s, n)| (s.kind.to_owned(), n.into())).collect();
    let imported = Imported { community_id: id, host, imported: !check, resigned: rows.resigned(), counts };
    if check {
        let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE community_id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        let exported = rows.counts[event_section()];
        if rows.missing() > 0 || u64::try_from(stored).ok() != Some(exported) {
            return Err(ImportError::CommunityConflict);
        }
        tx.rollback().await?;
        return Ok(imported);
    }
    let unrecorded: Option<String> =
        sqlx::query_scalar(UNRECORDED_REMOVAL).bind(id).fetch_optional(&mut *tx).await?;
    if let Some(event) = unrecorded {
        return Err(invalid(format!(
            "event {event}: a 45011 removal of a move the export's revision records do not show"
        )));
    }
    if let Some(key) = banned_member(&mut tx, id).await? {
        return Err(invalid(format!(
            "key {key} is both banned and a member of the community (a ban removes membership)"
        )));
    }
    tx.commit().await?;
    Ok(imported)
}

/// A key of the imported community that is both banned and a member (or its owner): the relay
/// never holds one (`buzz_store::bans`), and the paths that trust "a member is never banned"
/// (tokens, member changes, read markers) must not meet one from a file.
async fn banned_member(tx: &mut PgConnection, id: CommunityId) -> Result<Option<String>, sqlx::Error> {
    let migrated: bool =
        sqlx::query_scalar("SELECT to_regclass('community_bans') IS NOT NULL").fetch_one(&mut *tx).await?;
    if !migrated {
        return Ok(None);
    }
    sqlx::query_scalar(
        "SELECT b.pubkey FROM community_bans b WHERE b.community_id = $1 \
           AND (EXISTS (SELECT 1 FROM community_members m WHERE m.community_id = $1 AND m.pubkey = b.pubkey) \
                OR b.pubkey = (SELECT owner_pubkey FROM communities WHERE id = $1)) \
         ORDER BY b.pubkey LIMIT 1",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await
}

/// The header line's `relay_pubkey`, once its format and version are this relay's.
fn header(text: &str) -> Result<Pubkey, ImportError> {
    #[derive(serde::Deserialize)]
    struct Header<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        format: Cow<'a, str>,
        version: u64,
        #[serde(borrow)]
        relay_pubkey: Cow<'a, str>,
    }
    let first = || invalid(format!("the first line must be the {FORMAT} header"));
    let h: Header<'_> = serde_json::from_str(text).map_err(|_| first())?;
    if h.kind != "header" || h.format != FORMAT {
        return Err(first());
    }
    if h.version != VERSION {
        return Err(invalid(format!("only version {VERSION} of the format is read")));
    }
    Pubkey::parse(&h.relay_pubkey).map_err(|_| invalid("relay_pubkey must be 64 hex"))
}

fn event_section() -> usize {
    section_of("event").map_or(0, |(i, _)| i)
}

async fn insert_community(
    conn: &mut PgConnection,
    community: &Row<'_>,
    host: &str,
) -> Result<(), ImportError> {
    let columns = COMMUNITY_COLUMNS.replace("host,", "$2,");
    let sql = format!(
        "INSERT INTO communities ({COMMUNITY_COLUMNS}) SELECT {columns} \
         FROM jsonb_populate_record(NULL::communities, $1::jsonb)"
    );
    let done = sqlx::query(&sql).bind(community.text()).bind(host).execute(conn).await;
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
