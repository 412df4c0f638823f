//! `POST /restart/{daemon}`: asks the daemon's runner for a restart and
//! answers with its row once it is ready again, or with why not: 404 for a
//! daemon the tree does not run, 409 (retryable) when the supervisor runs
//! no daemon (standby, stopping) or the daemon cannot be restarted now,
//! 500 when the restart did not come back.

use axum::Json;
use axum::extract::{Path, State};
use metacore::api::supervisor::{DaemonStatus, Role};
use metacore::{ApiError, ErrorCode};
use tokio::sync::oneshot;

use super::{St, supervised};
use crate::lifecycle::Answer;
use crate::runner::Request;

pub(super) async fn restart(
    State(c): St,
    Path(name): Path<String>,
) -> Result<Json<DaemonStatus>, ApiError> {
    let daemon = supervised(&name)?;
    let role = c.role();
    if role != Role::Leader {
        return Err(conflict(format!(
            "meta-core is {}: it runs no daemon to restart",
            role.as_str()
        )));
    }
    let runner = c
        .runners
        .get()
        .and_then(|runners| runners.iter().find(|(d, _)| *d == daemon))
        .map(|(_, requests)| requests.clone());
    let Some(runner) = runner else {
        return Err(conflict(format!("{daemon} has not been started yet")));
    };
    let (reply, answer) = oneshot::channel();
    runner
        .send(Request::Restart(reply))
        .await
        .map_err(|_| conflict(format!("{daemon} is no longer supervised (stopping)")))?;
    // A runner gone without answering has been stopped.
    match answer.await.unwrap_or(Answer::StoppedInstead) {
        Answer::Ready => c
            .table
            .row(daemon)
            .map(Json)
            .ok_or_else(|| ApiError::internal(format!("{daemon} has no row"))),
        Answer::DidNotComeBack(ending) => Err(ApiError::internal(format!(
            "{daemon} did not come back: {ending}"
        ))),
        Answer::StoppedInstead => Err(conflict(format!("{daemon} stopped instead"))),
        Answer::GivenUp => Err(conflict(format!(
            "{daemon} has been given up on; meta-core is stopping"
        ))),
        Answer::NotStarted => Err(conflict(format!("{daemon} has not been started yet"))),
    }
}

fn conflict(message: String) -> ApiError {
    ApiError::new(ErrorCode::Conflict, message)
}
