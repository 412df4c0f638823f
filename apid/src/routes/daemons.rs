//! The console's buttons, on the supervisor's control socket (admin):
//! `POST /api/daemons/{daemon}/restart` restarts one daemon and answers its
//! row once it is ready again; `POST /api/tree/stop` begins the orderly
//! stop of the whole tree, as `meta-core stop` does.

use axum::Json;
use axum::extract::Path;
use metacore::api::supervisor::{DaemonStatus, StopAccepted};
use metacore::error::{ApiError, ErrorCode};
use metacore::layout::Daemon;

use crate::state::State;

/// The daemon `name` names, or the 404 of a route that takes one.
pub(crate) fn daemon(name: &str) -> Result<Daemon, ApiError> {
    Daemon::from_name(name).ok_or_else(|| {
        ApiError::not_found(format!(
            "no daemon {name:?} (the daemons are the rows of GET /status)"
        ))
    })
}

/// What a caller hears when the supervisor does not answer.
fn unsupervised(e: metacore::socket::client::ClientError) -> ApiError {
    match e {
        metacore::socket::client::ClientError::Api(api) => api,
        _ => ApiError::new(
            ErrorCode::Conflict,
            "the supervisor does not answer (apid runs without it?)",
        ),
    }
}

pub(crate) async fn restart(
    st: State,
    Path(name): Path<String>,
) -> Result<Json<DaemonStatus>, ApiError> {
    let d = daemon(&name)?;
    st.supervisor
        .restart(d)
        .await
        .map(Json)
        .map_err(unsupervised)
}

pub(crate) async fn stop_tree(st: State) -> Result<Json<StopAccepted>, ApiError> {
    st.supervisor.stop().await.map(Json).map_err(unsupervised)
}
