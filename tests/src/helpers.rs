//! Small helpers the test files share: a publish that must be accepted or refused, tags, a fresh
//! channel, percentiles and benchmark parameters.

use buzz_core::{Event, Keys};
use uuid::Uuid;

use crate::client::{create_channel, WsClient};

/// A tag `[name, value]`.
pub fn tag(name: &str, value: impl ToString) -> Vec<String> {
    vec![name.to_owned(), value.to_string()]
}

/// An event of `kind` in `channel` (an `h` tag) with `extra` tags and unique content, so that the
/// same change twice in one second is not one (duplicate) event.
#[must_use]
pub fn tagged(keys: &Keys, kind: u32, channel: Uuid, extra: Vec<Vec<String>>) -> Event {
    let mut tags = vec![tag("h", channel)];
    tags.extend(extra);
    keys.sign_new(kind, tags, &Uuid::new_v4().to_string())
}

/// Publishes `ev`, which must be accepted.
pub async fn ok(c: &mut WsClient, ev: &Event) {
    let (accepted, msg) = c.publish(ev).await;
    assert!(accepted, "kind {} refused: {msg}", ev.kind);
}

/// Publishes `ev`, which must be accepted with an empty `OK` message (no `duplicate:` or notice).
pub async fn ok_plain(c: &mut WsClient, ev: &Event) {
    let (accepted, msg) = c.publish(ev).await;
    assert!(accepted, "kind {} refused: {msg}", ev.kind);
    assert_eq!(msg, "", "kind {} accepted with a message", ev.kind);
}

/// Publishes `ev`, which must be refused with a message starting with `prefix`; the message.
pub async fn refused(c: &mut WsClient, ev: &Event, prefix: &str) -> String {
    let (accepted, msg) = c.publish(ev).await;
    assert!(!accepted, "kind {} was accepted, expected {prefix:?}", ev.kind);
    assert!(msg.starts_with(prefix), "kind {}: {msg:?} does not start with {prefix:?}", ev.kind);
    msg
}

/// Creates a channel named `work` with `visibility` as `owner`; its id.
pub async fn channel(c: &mut WsClient, owner: &Keys, visibility: &str) -> Uuid {
    let id = Uuid::new_v4();
    ok(c, &create_channel(owner, id, "work", visibility)).await;
    id
}

/// Nearest-rank percentile of ascending `sorted`: the ceil(n * pct / 100)-th smallest value.
///
/// # Panics
/// When `sorted` is empty.
#[must_use]
pub fn percentile<T: Copy>(sorted: &[T], pct: usize) -> T {
    let rank = (sorted.len() * pct).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Gateway settings for a benchmark that times REQs back to back on one socket: no per-socket
/// read rate limit (the relay's default refills 20 a second).
pub fn unmetered_reads(s: &mut buzz_gateway::Settings) {
    s.rate_read_per_sec = 1e6;
    s.rate_read_burst = 1_000_000;
}

/// A benchmark parameter from the environment, or `default` when unset or unparsable.
pub fn bench_param<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A storage failure only some events run into: a trigger refusing to store any event whose JSON
/// contains "poison pill" (group-commit failure isolation).
pub async fn poison_pills_fail_to_store(pool: &sqlx::PgPool) {
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN RAISE EXCEPTION 'poisoned'; END $$; \
         CREATE TRIGGER refuse_poison BEFORE INSERT ON events FOR EACH ROW \
         WHEN (NEW.raw LIKE '%poison pill%') EXECUTE FUNCTION refuse_poison();",
    )
    .execute(pool)
    .await
    .expect("create the poison trigger");
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u32> = (1..=10).collect();
        assert_eq!((percentile(&v, 50), percentile(&v, 99), percentile(&v, 100)), (5, 10, 10));
        assert_eq!(percentile(&v, 0), 1);
        assert_eq!(percentile(&[7], 50), 7);
    }
}
