//! Snapshot-service replicas of the test cluster, each stoppable on its own (tests change the
//! replica serving a capture between two of its requests).

use std::net::SocketAddr;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One snapshot-service replica.
pub struct SnapshotReplica {
    /// Its admin listener.
    pub admin: SocketAddr,
    /// Stops this replica only.
    pub shutdown: CancellationToken,
    /// Its task, taken when the replica is stopped.
    pub task: Option<JoinHandle<anyhow::Result<()>>>,
}

pub(crate) async fn spawn_snapshot(
    settings: &buzz_snapshot::Settings,
    shutdown: &CancellationToken,
) -> SnapshotReplica {
    let app = buzz_snapshot::Application::build(settings.clone()).await.expect("snapshot-service");
    let admin = app.admin_addr();
    let token = shutdown.child_token();
    let task = tokio::spawn(app.run(token.clone()));
    SnapshotReplica { admin, shutdown: token, task: Some(task) }
}
