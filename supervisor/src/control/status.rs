//! `GET /status`: the role, the leader and the daemon table.

use axum::Json;
use axum::extract::State;
use metacore::api::supervisor::SupervisorStatus;

use super::St;

/// The table, and for each ready daemon whether its `/health` says it is
/// degraded (asked at once, each within the health timeout).
pub(super) async fn status(State(c): St) -> Json<SupervisorStatus> {
    let mut s = c.status();
    let asks = s.daemons.iter().map(|d| {
        let socket = c.run_dir.join(format!("{}.sock", d.name.name()));
        let (daemon, ready) = (d.name, d.ready);
        async move {
            if !ready {
                return None;
            }
            crate::health::degraded(daemon, &socket).await
        }
    });
    let degraded = futures_util::future::join_all(asks).await;
    for (d, why) in s.daemons.iter_mut().zip(degraded) {
        d.degraded = why;
    }
    Json(s)
}
