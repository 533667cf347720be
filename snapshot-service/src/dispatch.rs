//! One request end to end: parse, scope check, the community's share of the per-process
//! operations, the per-process operation limit and the elapsed limit, then the action (`start` in [`crate::service`], the rest in [`crate::reads`]).

use buzz_bus::snapshot::{SnapshotCode, SnapshotFailure, SnapshotRequest};
use buzz_bus::{BusError, Scope};

use crate::action::{self, Action};
use crate::service::{normal, Outcome, Service};

impl Service {
    /// Answers one request with the HTTP body, or the failure.
    pub async fn handle(&self, req: SnapshotRequest) -> Outcome {
        let action = action::parse(&req.filter)?;
        if !req.reader.has_scope(Scope::MessagesRead) {
            return Err(normal(BusError::restricted(buzz_core::refusal::READ_SCOPE)));
        }
        // The community's share first, so that a community at its share never takes a process
        // slot another community could have had.
        let Some(_share) = self.shares.try_take(req.community_id) else {
            metrics::counter!("buzz_snapshot_quota_refusals_total", "quota" => "community_operations")
                .increment(1);
            return Err(SnapshotCode::SnapshotUnavailable.into());
        };
        let Ok(_permit) = self.ops.clone().try_acquire_owned() else {
            metrics::counter!("buzz_snapshot_busy_total").increment(1);
            return Err(SnapshotCode::SnapshotUnavailable.into());
        };
        let started = std::time::Instant::now();
        let name = action.name();
        let outcome = match tokio::time::timeout(self.operation_timeout, self.run(&req, action)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(SnapshotCode::SnapshotUnavailable.into()),
        };
        metrics::histogram!("buzz_snapshot_seconds").record(started.elapsed().as_secs_f64());
        count(name, &outcome);
        outcome
    }

    async fn run(&self, req: &SnapshotRequest, action: Action) -> Outcome {
        match action {
            Action::Start { query } => self.start(req, &query).await,
            Action::Page { token, cursor } => self.page(req, token, cursor).await,
            Action::Bodies { token, revisions } => self.bodies(req, token, &revisions).await,
            Action::Complete { token } => self.complete(req, token).await,
        }
    }
}

/// `buzz_snapshot_requests_total{action, outcome}` for every answered action, and the two events a
/// team alerts on: `buzz_snapshot_captures_total` (a start that published a manifest) and
/// `buzz_snapshot_resets_total` (a 409 `snapshot_reset`: the client must capture again).
fn count(action: &'static str, outcome: &Outcome) {
    let code = match outcome {
        Ok(_) => "ok",
        Err(SnapshotFailure::Snapshot { code }) => code.as_str(),
        Err(SnapshotFailure::Normal { error }) => error.code.as_str(),
    };
    metrics::counter!("buzz_snapshot_requests_total", "action" => action, "outcome" => code).increment(1);
    if action == "start" && code == "ok" {
        metrics::counter!("buzz_snapshot_captures_total").increment(1);
    }
    if code == SnapshotCode::SnapshotReset.as_str() {
        metrics::counter!("buzz_snapshot_resets_total").increment(1);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    use buzz_bus::snapshot::LIMITS;
    use tokio::sync::Semaphore;

    use crate::state::SharedState;

    /// A service whose PostgreSQL and Redis are never reached (Redis calls time out in 10 ms).
    fn unreachable_service() -> Service {
        let redis = fred::prelude::Builder::default_centralized().build_pool(1).unwrap();
        Service {
            pool: sqlx::PgPool::connect_lazy("postgres://nobody@127.0.0.1:1/none").unwrap(),
            state: SharedState::new(redis, "t:", Duration::from_millis(10)),
            statement_timeout_ms: 2000,
            operation_timeout: Duration::from_secs(8),
            ops: Arc::new(Semaphore::new(LIMITS.operations_per_process)),
            shares: crate::shares::OperationShares::new(2),
            max_manifest_bytes: LIMITS.max_manifest_bytes,
            lease_ms: 8000,
        }
    }

    #[tokio::test]
    async fn a_fifth_concurrent_operation_in_one_process_is_unavailable_at_once() {
        let service = unreachable_service();
        let held: Vec<_> = (0..4).map(|_| service.ops.clone().try_acquire_owned().unwrap()).collect();
        let req = SnapshotRequest {
            community_id: buzz_core::CommunityId::new_v4(),
            reader: buzz_bus::Actor::session(buzz_core::Pubkey::parse(&"a".repeat(64)).unwrap()),
            filter: serde_json::json!({"artifact":"snapshot","action":"start","query":{"artifact":"current"}}),
        };
        let busy = tokio::time::timeout(Duration::from_secs(1), service.handle(req)).await.unwrap();
        assert_eq!(busy, Err(SnapshotCode::SnapshotUnavailable.into()));
        drop(held);
    }

    /// A community at its share of the process's operations is answered at once and takes no
    /// process slot; another community's request still gets one.
    #[tokio::test]
    async fn a_community_at_its_share_of_operations_is_unavailable_at_once_and_leaves_the_rest() {
        let service = unreachable_service();
        let (noisy, quiet) = (buzz_core::CommunityId::new_v4(), buzz_core::CommunityId::new_v4());
        let held: Vec<_> = (0..2).map(|_| service.shares.try_take(noisy).unwrap()).collect();
        let req = |community_id| SnapshotRequest {
            community_id,
            reader: buzz_bus::Actor::session(buzz_core::Pubkey::parse(&"a".repeat(64)).unwrap()),
            filter: serde_json::json!({"artifact":"snapshot","action":"start","query":{"artifact":"current"}}),
        };
        let busy = tokio::time::timeout(Duration::from_millis(500), service.handle(req(noisy))).await;
        assert_eq!(busy.unwrap(), Err(SnapshotCode::SnapshotUnavailable.into()));
        assert_eq!(service.ops.available_permits(), LIMITS.operations_per_process);
        // Its refusal took no process slot, and the quiet community still has its share.
        assert!(service.shares.try_take(quiet).is_some());
        drop(held);
    }

    /// A deletion must not complete on a purge that did not happen: the answer says so, and holds
    /// no operation slot while it waits.
    #[tokio::test]
    async fn a_purge_the_store_cannot_do_is_answered_unavailable() {
        let service = unreachable_service();
        let held: Vec<_> = (0..4).map(|_| service.ops.clone().try_acquire_owned().unwrap()).collect();
        let req = buzz_bus::snapshot::PurgeCaptures { community_id: buzz_core::CommunityId::new_v4() };
        let answer = tokio::time::timeout(Duration::from_secs(1), service.purge(&req)).await.unwrap();
        assert_eq!(answer, Err(BusError::unavailable("snapshot store unavailable")));
        drop(held);
    }
}
