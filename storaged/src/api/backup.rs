//! `POST /backup`: a consistent copy of the live database to the file the
//! body names (`crate::backup`).

use axum::Json;
use metacore::api::storaged::{BackupDone, BackupRequest};
use metacore::socket::body::{JsonBody, JsonReply};

use super::State;

pub(super) async fn backup(
    st: State,
    JsonBody(req): JsonBody<BackupRequest>,
) -> JsonReply<BackupDone> {
    // Its connection would open whatever is at the path, beside this
    // process's WAL.
    if let Some(why) = st.store.files_refused() {
        return Err(metacore::error::ApiError::new(
            metacore::error::ErrorCode::StorageUnavailable,
            why,
        ));
    }
    match st.backups.take(req, st.shutdown.clone()).await {
        Ok(done) => Ok(Json(done)),
        Err(e) => Err(e.to_api()),
    }
}
