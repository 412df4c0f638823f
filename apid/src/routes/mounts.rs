//! The mounts API (`/api/mounts...`), served by mountd on its socket and
//! relayed here as it answers ([`super::relay`]). All of them are admin
//! routes (`META_CORE_ADMIN_TOKEN`).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use metacore::error::ApiError;

use super::relay::{self, Relayed};
use crate::state::AppState;

/// Largest body a mounts route takes (a mount's settings).
pub(crate) const MAX_MOUNT_BODY: usize = 16 * 1024;

/// mountd's mounts API, relayed.
static MOUNTS: Relayed = Relayed {
    public: "/api/mounts",
    socket: "/mounts",
    // A `safe-unmount` waits up to 120 s for open files to close (mountd
    // bounds it), then for the mount's lock (a mount attempt of the
    // keeper's: 15 s of listing, 20 s of mounting) and up to 20 s for
    // rclone to unmount.
    within: Duration::from_secs(180),
    max_body: MAX_MOUNT_BODY,
    // The wait of `safe-unmount`; the other routes take no query.
    query: &["timeout"],
    check: checked_id,
    client: |st| st.mountd.agreed(),
};

pub(crate) fn routes() -> Router<Arc<AppState>> {
    relay::routes(&MOUNTS)
}

/// The first segment after `/api/mounts` is a mount id as mountd makes
/// them (a UUID), or `rclone` (`/api/mounts/rclone/remotes`): anything
/// else names no mount, and is answered here without a call.
fn checked_id(segments: &[&str]) -> Result<(), ApiError> {
    let id = match segments {
        [] | ["rclone", _, ..] => return Ok(()),
        [id, ..] => id,
    };
    let is_uuid = id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    if is_uuid {
        Ok(())
    } else {
        Err(ApiError::not_found(
            "mount not found: the id is not a mount id",
        ))
    }
}
