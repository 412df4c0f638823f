//! `GET /status`: the role, the leader and the daemon table.

use axum::Json;
use axum::extract::State;
use metacore::api::supervisor::SupervisorStatus;

use super::St;

pub(super) async fn status(State(c): St) -> Json<SupervisorStatus> {
    Json(c.status())
}
