//! mountd's socket: `/health`, `/status`, `/metrics` and the mounts API,
//! which apid exposes under `/api/mounts` (the original's routes and
//! shapes).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Path as UrlPath, Query, State as AxState};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use metacore::api::mountd::{
    MountDone, MountEdit, MountList, MountdStatus, NewMount, OneMount, Remote, Remotes,
    SafeUnmountQuery,
};
use metacore::error::{ApiError, ErrorCode};
use metacore::layout::Daemon;
use metacore::socket::Health;
use metacore::socket::body::{JsonBody, JsonReply, no_method, no_route};

use crate::manager::{Manager, mount_failed};
use crate::rc::Rc;
use crate::rcd::NoRclone;
use crate::request;

/// Largest body the mounts API takes.
pub const MAX_BODY: usize = 16 * 1024;
/// `safe-unmount`'s wait when no `timeout` is given, and the longest one
/// taken (apid waits a little longer for the answer).
pub const DEFAULT_SAFE_WAIT_MS: u64 = 60_000;
pub const MAX_SAFE_WAIT_MS: u64 = 120_000;

type State = AxState<Arc<Manager>>;

pub fn router(m: Arc<Manager>) -> Router {
    Router::new()
        .route(
            "/health",
            get(|| async { Json(Health::ok(Daemon::Mountd)) }),
        )
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/mounts", get(list).post(create))
        .route("/mounts/rclone/remotes", get(remotes))
        .route(
            "/mounts/{id}",
            get(get_one).put(update).patch(update).delete(delete),
        )
        .route("/mounts/{id}/mount", post(mount))
        .route("/mounts/{id}/unmount", post(unmount))
        .route("/mounts/{id}/safe-unmount", post(safe_unmount))
        .route("/mounts/{id}/scan", post(scan))
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(m)
}

async fn status(st: State) -> Json<MountdStatus> {
    Json(MountdStatus {
        daemon: Daemon::Mountd,
        version: env!("CARGO_PKG_VERSION").into(),
        pid: std::process::id(),
        rclone: st.rcd().status(),
        mounts: st.count(),
        looks: st.looks(),
    })
}

/// The mounts up, wanted and failing, the remounts and rclone as
/// OpenMetrics text ([`crate::metrics`]).
async fn metrics(st: State) -> axum::response::Response {
    metacore::metrics::answer(crate::metrics::render(&st))
}

fn done(status: &str, message: impl Into<String>) -> Json<MountDone> {
    Json(MountDone {
        status: status.into(),
        message: message.into(),
        mount_id: None,
        mount_path: None,
        file_count: None,
    })
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("mount not found: {id}"))
}

/// How long a create, an enable or a mount waits for the mount before it
/// answers; the mount goes on after (a remote that does not answer takes
/// up to 15 s to say so).
const MOUNT_WAIT: Duration = Duration::from_secs(5);

/// Mounts `id` in a task of its own: its outcome when it comes within
/// [`MOUNT_WAIT`], `None` while it is still under way.
async fn mount_within(st: &State, id: &str) -> Option<Result<(), String>> {
    mount_until(st, id, tokio::time::Instant::now() + MOUNT_WAIT).await
}

/// [`mount_within`], the outcome waited for until `until`.
async fn mount_until(
    st: &State,
    id: &str,
    until: tokio::time::Instant,
) -> Option<Result<(), String>> {
    let m = st.0.clone();
    let id = id.to_owned();
    let task = tokio::spawn(async move { m.mount(&id).await });
    match tokio::time::timeout_at(until, task).await {
        Ok(Ok(outcome)) => Some(outcome),
        Ok(Err(e)) => Some(Err(format!("the mount failed: {e}"))),
        Err(_) => None,
    }
}

/// How long a request waits for an rclone that is starting.
const RCLONE_WAIT: Duration = Duration::from_secs(5);

/// The running rclone. While it is starting or restarting the request
/// waits for it, up to [`RCLONE_WAIT`] (then 503); 409 `disabled` when it
/// is not installed (nothing mounts without it).
async fn need_rclone(m: &Manager) -> Result<Rc, ApiError> {
    let mut changed = m.rcd().subscribe();
    let until = tokio::time::Instant::now() + RCLONE_WAIT;
    loop {
        match m.rcd().unavailable() {
            None => {
                if let Some(rc) = m.rcd().rc() {
                    return Ok(rc);
                }
            }
            Some(NoRclone::NotInstalled(why)) => {
                return Err(ApiError::new(
                    ErrorCode::Disabled,
                    format!("{why}: mounts need rclone on the machine"),
                ));
            }
            Some(NoRclone::NotRunning(why)) => {
                if tokio::time::timeout_at(until, changed.changed())
                    .await
                    .is_err()
                {
                    return Err(ApiError::unavailable(format!("{why}; retry shortly")));
                }
            }
        }
    }
}

async fn list(st: State) -> Json<MountList> {
    Json(MountList { mounts: st.list() })
}

async fn create(
    st: State,
    JsonBody(new): JsonBody<NewMount>,
) -> Result<(StatusCode, Json<OneMount>), ApiError> {
    let checked = request::check(&new)?;
    let rc = need_rclone(&st).await?;
    // The judgement and the mount share the create's wait.
    let until = tokio::time::Instant::now() + MOUNT_WAIT;
    let mut c = checked.config;
    // A remote that is not configured, of type local, or serving one of
    // meta-core's places: a 400, nothing stored.
    st.judge_new(&rc, &c, until).await?;
    if let Some(clear) = checked.smb_password {
        c.smb_password_obscured = rc
            .obscure(&clear)
            .await
            .map_err(|e| ApiError::unavailable(format!("rclone could not obscure: {e}")))?;
    }
    c.id = uuid::Builder::from_random_bytes(rand::random())
        .into_uuid()
        .to_string();
    c.mount_path = crate::config::mount_path(st.files(), &c.name)
        .ok_or_else(|| ApiError::bad_request("name: needs a letter or digit"))?
        .display()
        .to_string();
    let id = c.id.clone();
    let mount_now = c.enabled && c.desired_mounted;
    st.add(c)?;
    if mount_now {
        // A failure is in the mount's status and error file; the keeper
        // tries again.
        let _ = mount_until(&st, &id, until).await;
    }
    let mount = st.status(&id).ok_or_else(|| not_found(&id))?;
    Ok((StatusCode::CREATED, Json(OneMount { mount })))
}

async fn get_one(st: State, UrlPath(id): UrlPath<String>) -> JsonReply<OneMount> {
    let mount = st.status(&id).ok_or_else(|| not_found(&id))?;
    Ok(Json(OneMount { mount }))
}

/// `PUT`/`PATCH`: the cache and polling settings, and `enabled` (off
/// unmounts, on mounts).
async fn update(
    st: State,
    UrlPath(id): UrlPath<String>,
    JsonBody(u): JsonBody<MountEdit>,
) -> JsonReply<OneMount> {
    let (mut was, mut now) = (false, false);
    st.edit(&id, |c| {
        request::apply(&u.tuning, c)?;
        was = c.enabled && c.desired_mounted;
        if let Some(on) = u.enabled {
            c.enabled = on;
            if on {
                c.desired_mounted = true;
            }
        }
        now = c.enabled && c.desired_mounted;
        Ok(())
    })?;
    if was && !now {
        st.take_down(&id).await?;
    } else if now && !was {
        // A failure is in the mount's status; the keeper tries again.
        let _ = mount_within(&st, &id).await;
    }
    let mount = st.status(&id).ok_or_else(|| not_found(&id))?;
    Ok(Json(OneMount { mount }))
}

async fn delete(st: State, UrlPath(id): UrlPath<String>) -> JsonReply<MountDone> {
    st.delete(&id).await?;
    Ok(done("ok", "Mount deleted"))
}

async fn mount(st: State, UrlPath(id): UrlPath<String>) -> JsonReply<MountDone> {
    st.config(&id).ok_or_else(|| not_found(&id))?;
    need_rclone(&st).await?;
    let c = st.edit(&id, |m| {
        m.enabled = true;
        m.desired_mounted = true;
        Ok(())
    })?;
    match mount_within(&st, &id).await {
        Some(done_now) => {
            done_now.map_err(mount_failed)?;
            Ok(done("ok", format!("Mounted at {}", c.mount_path)))
        }
        None => Ok(done(
            "ok",
            format!(
                "Mount under way after {} s (the remote is slow to answer); \
                 GET /api/mounts/{id} says when it is up, or why not",
                MOUNT_WAIT.as_secs()
            ),
        )),
    }
}

async fn unmount(st: State, UrlPath(id): UrlPath<String>) -> JsonReply<MountDone> {
    st.take_down(&id).await?;
    Ok(done("ok", "Unmounted"))
}

async fn safe_unmount(
    st: State,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<SafeUnmountQuery>,
) -> JsonReply<MountDone> {
    let c = st.config(&id).ok_or_else(|| not_found(&id))?;
    let wait_ms = match q.timeout.as_deref() {
        None | Some("") => DEFAULT_SAFE_WAIT_MS,
        Some(t) => t
            .parse::<u64>()
            .ok()
            .filter(|ms| *ms <= MAX_SAFE_WAIT_MS)
            .ok_or_else(|| {
                ApiError::bad_request(format!("timeout: milliseconds, at most {MAX_SAFE_WAIT_MS}"))
            })?,
    };
    let open = st.wait_closed(&id, Duration::from_millis(wait_ms)).await;
    if open.is_empty() {
        st.take_down(&id).await?;
        return Ok(done("ok", "Unmounted: nothing under it was open"));
    }
    let first = open[0]
        .strip_prefix(crate::system::resolved(st.files()))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    Ok(done(
        "warning",
        format!(
            "{} still open under {} after {wait_ms} ms (first: {first}); left mounted",
            match open.len() {
                1 => "1 file".to_owned(),
                n if n >= 20 => "20 or more files".to_owned(),
                n => format!("{n} files"),
            },
            c.mount_path
        ),
    ))
}

async fn scan(st: State, UrlPath(id): UrlPath<String>) -> JsonReply<MountDone> {
    let s = st.status(&id).ok_or_else(|| not_found(&id))?;
    if !s.mounted {
        return Err(ApiError::bad_request(format!(
            "mount {id} is not mounted: nothing to scan"
        )));
    }
    let n = st.scan(&id, false).await?;
    Ok(Json(MountDone {
        status: "ok".into(),
        message: "Scan triggered".into(),
        mount_id: Some(id),
        mount_path: Some(s.config.mount_path),
        file_count: Some(n),
    }))
}

/// The remotes of rclone's configuration, by name, with their type (and
/// nothing else of their configuration).
async fn remotes(st: State) -> JsonReply<Remotes> {
    let rc = need_rclone(&st).await?;
    let dump = rc
        .remotes()
        .await
        .map_err(|e| ApiError::unavailable(format!("rclone could not list its remotes: {e}")))?;
    // By name: the map is ordered.
    let remotes = dump
        .into_iter()
        .map(|(name, conf)| Remote {
            name,
            kind: conf.kind,
        })
        .collect();
    Ok(Json(Remotes { remotes }))
}
