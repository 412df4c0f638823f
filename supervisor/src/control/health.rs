//! `GET /health`: the supervisor answers, with its role.

use axum::Json;
use axum::extract::State;
use metacore::api::supervisor::SupervisorHealth;

use super::St;

pub(super) async fn health(State(c): St) -> Json<SupervisorHealth> {
    Json(SupervisorHealth {
        status: "ok".into(),
        role: c.role(),
    })
}
