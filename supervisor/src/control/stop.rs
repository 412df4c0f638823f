//! `POST /stop`: starts the orderly stop of the tree and answers at once
//! (the CLI waits for the socket to go away).

use axum::Json;
use axum::extract::State;
use metacore::api::supervisor::StopAccepted;

use super::St;

pub(super) async fn stop(State(c): St) -> Json<StopAccepted> {
    tracing::info!("stop requested on the control socket");
    c.stop.fire();
    Json(StopAccepted { stopping: true })
}
