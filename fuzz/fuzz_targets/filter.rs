//! A REQ filter (optionally with an event: `[filter, event]`) through `Filter::from_value`,
//! `validate`, `validate_artifact`, `matches` and `matched_replaced`.
//! Asserts: no panic; `to_value` → `from_value` is the identity; dropping any condition never
//! turns a match into a miss; an event built from the filter's first values matches it.
#![no_main]

use buzz_core::artifact_query::ArtifactForm;
use buzz_core::{Event, EventId, Filter, Limits, Pubkey};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

fn fixed_event() -> Event {
    Event {
        id: EventId::from_bytes(&[1; 32]),
        pubkey: Pubkey::from_bytes(&[2; 32]),
        created_at: 1_700_000_000,
        kind: 45010,
        tags: vec![vec!["h".into(), "x".into()], vec!["type".into(), "buzz.task".into()]],
        content: String::new(),
        sig: "0".repeat(128),
    }
}

/// Each filter with one condition dropped.
fn relaxed(f: &Filter) -> Vec<Filter> {
    let mut out = vec![
        Filter { ids: None, ..f.clone() },
        Filter { authors: None, ..f.clone() },
        Filter { kinds: None, ..f.clone() },
        Filter { since: None, ..f.clone() },
        Filter { until: None, ..f.clone() },
        Filter { limit: None, offset: None, ..f.clone() },
        Filter { artifact: None, ..f.clone() },
        Filter { search: None, ..f.clone() },
    ];
    for name in f.tags.keys() {
        let mut g = f.clone();
        g.tags.remove(name);
        out.push(g);
    }
    out
}

/// An event that satisfies every condition of `f`, when one exists (never for a NIP-50 search:
/// full-text matching is the store's, a search matches nothing live).
fn witness(f: &Filter) -> Option<Event> {
    if f.search.is_some() {
        return None;
    }
    let since = f.since.unwrap_or(0);
    if f.until.is_some_and(|u| u < since) {
        return None;
    }
    let kind = match (&f.kinds, f.artifact) {
        (Some(k), None) => *k.first()?,
        (Some(k), Some(_)) => k.iter().copied().find(|k| *k == 45010)?,
        (None, _) => 45010,
    };
    let mut tags = Vec::new();
    for (name, values) in &f.tags {
        tags.push(vec![name.clone(), values.first()?.clone()]);
    }
    Some(Event {
        id: f.ids.as_ref().map_or(Some(EventId::from_bytes(&[1; 32])), |v| v.first().cloned())?,
        pubkey: f.authors.as_ref().map_or(Some(Pubkey::from_bytes(&[2; 32])), |v| v.first().cloned())?,
        created_at: since,
        kind,
        tags,
        content: String::new(),
        sig: "0".repeat(128),
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let (raw_filter, event) = match value.as_array().map(Vec::as_slice) {
        Some([f, e]) => match serde_json::from_value::<Event>(e.clone()) {
            Ok(event) => (f.clone(), event),
            Err(_) => (value.clone(), fixed_event()),
        },
        _ => (value.clone(), fixed_event()),
    };
    let Ok(filter) = Filter::from_value(&raw_filter) else { return };
    let back = filter.to_value();
    assert_eq!(Filter::from_value(&back).as_ref(), Ok(&filter), "round trip of {back}");

    let limits = Limits::default();
    let _ = filter.validate(&limits);
    let _ = filter.validate_artifact(ArtifactForm::Current, &limits.artifacts);
    let _ = filter.validate_artifact(ArtifactForm::History, &limits.artifacts);
    let _ = filter.effective_limit(&limits);
    let _ = filter.search_query();
    if filter.search.is_some() {
        assert!(!filter.matches(&event), "a search matched live: {}", filter.to_value());
    }

    if filter.matches(&event) {
        for g in relaxed(&filter) {
            assert!(
                g.matches(&event),
                "dropping a condition lost a match: {} vs {}",
                g.to_value(),
                event.to_json()
            );
        }
    }
    if let Some(w) = witness(&filter) {
        assert!(filter.matches(&w), "{} does not match its witness {}", filter.to_value(), w.to_json());
    }
    let replaced: Vec<[String; 2]> = event
        .tags
        .iter()
        .filter_map(|t| Some([t.first()?.clone(), hex::encode(Sha256::digest(t.get(1)?.as_bytes()))]))
        .collect();
    let _ = filter.matched_replaced(&event, &replaced);
});
