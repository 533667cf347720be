//! The statements of an import that write the file's rows (`rows.rs`) and the relay's
//! derived events (`relay.rs`), and the temporary table that maps a derived event's file
//! id to its new one.

use crate::portability::format::Section;
use crate::portability::import::seq::seq_column;

/// The file id → new id of every event this relay derived (and what the end checks need), in the
/// import's transaction rather than the policy-service's memory: a file may carry as many as it
/// has lines. `slot` is one per channel and kind, or per removed revision.
pub const CREATE_RELAY_IDS: &str = "CREATE TEMPORARY TABLE import_relay_ids ( \
     old text PRIMARY KEY, new text NOT NULL, kind bigint NOT NULL, slot text NOT NULL UNIQUE, \
     d uuid, h uuid, e text) ON COMMIT DROP";

/// Records derived events: `$1` old ids, `$2` new ids, `$3` kinds, `$4` slots, `$5`-`$7` a
/// removal's `d`, `h`, `e` (NULL otherwise).
pub const INSERT_RELAY_IDS: &str = "INSERT INTO import_relay_ids (old, new, kind, slot, d, h, e) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::uuid[], $6::uuid[], $7::text[])";

/// The tag rows of derived events (`buzz_store::tag_rows::event_tag_rows`): `$1` the community,
/// `$2` event ids, `$3` names, `$4` value hashes, `$5` created_at.
pub const INSERT_DERIVED_TAGS: &str =
    "INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
     SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bytea[], $5::bigint[])";

/// A derived removal whose move the imported revision records do not show (`$1` the community):
/// a `move` record of its artifact whose `prev` is the removal's `e`, the replaced revision
/// recorded in the removal's `h`, the move going elsewhere.
pub const UNRECORDED_REMOVAL: &str = "SELECT x.old FROM import_relay_ids x WHERE x.d IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM artifact_revisions m JOIN artifact_revisions p \
                     ON p.community_id = m.community_id AND p.revision_id = m.prev \
                     WHERE m.community_id = $1 AND m.d = x.d AND m.op = 'move' AND m.prev = x.e \
                       AND p.channel_id = x.h AND m.channel_id <> x.h) \
     LIMIT 1";

/// The sections whose `event_id` names an event a derived one may have replaced.
fn renamed_event_id(section: &str) -> bool {
    matches!(section, "read_marker" | "mention" | "event_ban")
}

/// The statement that inserts a batch of `section`'s rows (`$1` the community, `$2` the rows as a
/// JSON array; for `event_tag`, `$3` this relay's key): a seq column (`seq::seq_column`)
/// takes the new number of its value (`import_seq`), audit rows the next numbers of their identity
/// in their `seq` order, an `event_id` the id of the event derived in its place; tag rows are
/// kept only for the file's client events (a derived event has its own). Every other column is
/// the row's own.
#[must_use]
pub fn insert_sql(section: &Section) -> String {
    let (kind, table, cols) = (section.kind, section.table, section.columns);
    let mapped = seq_column(kind).or((kind == "audit").then_some("seq"));
    let select: Vec<String> = cols
        .split(", ")
        .map(|c| match c {
            _ if Some(c) == mapped => "n.new".to_owned(),
            "event_id" if renamed_event_id(kind) => "COALESCE(x.new, r.event_id)".to_owned(),
            _ => format!("r.{c}"),
        })
        .collect();
    let select = select.join(", ");
    let rows = format!("jsonb_populate_recordset(NULL::{table}, $2::jsonb) r");
    let overriding = if matches!(kind, "event" | "audit") { "OVERRIDING SYSTEM VALUE " } else { "" };
    let head = format!("INSERT INTO {table} (community_id, {cols}) {overriding}SELECT $1, {select}");
    let from = match (kind, mapped) {
        ("audit", _) => format!(
            "FROM (SELECT r.*, row_number() OVER (ORDER BY r.seq) AS rank FROM {rows}) r \
             JOIN (SELECT new, row_number() OVER (ORDER BY new) AS rank FROM ( \
                   SELECT nextval(pg_get_serial_sequence('{table}', 'seq')::regclass) AS new \
                   FROM generate_series(1, jsonb_array_length($2::jsonb))) x) n USING (rank)"
        ),
        ("event_tag", _) => {
            format!(
                "FROM {rows} JOIN events e ON e.community_id = $1 AND e.id = r.event_id AND e.pubkey <> $3"
            )
        }
        (_, Some(column)) => format!("FROM {rows} JOIN import_seq n ON n.old = r.{column}"),
        _ => format!("FROM {rows}"),
    };
    let renamed =
        if renamed_event_id(kind) { " LEFT JOIN import_relay_ids x ON x.old = r.event_id" } else { "" };
    format!("{head} {from}{renamed}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portability::format::section_of;

    fn sql(kind: &str) -> String {
        section_of(kind).map(|(_, s)| insert_sql(s)).unwrap_or_default()
    }

    #[test]
    fn seq_columns_take_the_new_number_of_their_value_and_nothing_else_is_renumbered() {
        let events = sql("event");
        assert!(
            events.contains("JOIN import_seq n ON n.old = r.seq")
                && events.contains("$1, r.id, n.new, r.pubkey")
        );
        assert!(events.contains("OVERRIDING SYSTEM VALUE"), "{events}");
        assert!(
            sql("revision").contains("n.new, r.accepted_at")
                && sql("revision").contains("n.old = r.accepted_seq")
        );
        for kind in ["read_marker", "mention"] {
            assert!(sql(kind).contains("n.old = r.seq") && !sql(kind).contains("OVERRIDING"), "{kind}");
        }
        let audit = sql("audit");
        assert!(audit.contains("SELECT $1, n.new, r.actor") && audit.contains("ORDER BY r.seq"), "{audit}");
        assert!(audit.contains("pg_get_serial_sequence('community_audit', 'seq')"), "{audit}");
        let member = sql("member");
        assert!(
            !member.contains("import_seq") && member.contains("SELECT $1, r.pubkey, r.role, r.added_at FROM")
        );
    }

    #[test]
    fn references_to_a_derived_event_take_its_new_id_and_its_tag_rows_are_never_the_files() {
        for kind in ["read_marker", "mention", "event_ban"] {
            let s = sql(kind);
            assert!(
                s.contains("COALESCE(x.new, r.event_id)")
                    && s.ends_with("LEFT JOIN import_relay_ids x ON x.old = r.event_id"),
                "{s}"
            );
        }
        let tags = sql("event_tag");
        assert!(
            tags.contains("JOIN events e ON e.community_id = $1 AND e.id = r.event_id AND e.pubkey <> $3"),
            "{tags}"
        );
        assert!(!sql("event").contains("import_relay_ids") && !sql("revision").contains("COALESCE"));
    }
}
