//! A request body must keep coming: one that goes
//! `META_CORE_HTTP_BODY_TIMEOUT_MS` without a byte fails, so a client
//! cannot hold a request (and its slot, its buffers) open by trickling or
//! stopping. The wait starts when the handler first waits for the body,
//! and starts again with each piece that arrives.
//!
//! Whatever the handler then answers (a JSON route a 400, dav-server a
//! 502 for a body that failed), the client is told what happened: 408
//! `request_timeout` with the error envelope, on every route, decided
//! here once rather than by each handler.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use metacore::error::{ApiError, ErrorCode};
use tokio::time::Sleep;

/// The middleware: every request's body under the progress limit, and a
/// 408 for a request whose body stalled.
pub(crate) async fn limit(req: Request, next: Next, idle: Duration) -> Response {
    let stalled = Arc::new(AtomicBool::new(false));
    let watched = stalled.clone();
    let resp = next
        .run(req.map(|b| Body::new(Progress::new(b, idle, watched))))
        .await;
    if stalled.load(Ordering::Acquire) {
        return stalled_answer(idle);
    }
    resp
}

/// The answer to a request whose body stopped coming.
fn stalled_answer(idle: Duration) -> Response {
    let mut r = ApiError::new(
        ErrorCode::RequestTimeout,
        format!(
            "no byte of the request body came for {} ms; send it again",
            idle.as_millis()
        ),
    )
    .into_response();
    // The rest of the body may still come: the connection cannot carry
    // another request.
    r.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    r
}

struct Progress {
    inner: Body,
    idle: Duration,
    /// Armed while the body is awaited and nothing comes.
    deadline: Option<Pin<Box<Sleep>>>,
    /// Set when the deadline passed: read by [`limit`] once the handler
    /// has answered, to turn its answer into a 408.
    stalled: Arc<AtomicBool>,
}

impl Progress {
    fn new(inner: Body, idle: Duration, stalled: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            idle,
            deadline: None,
            stalled,
        }
    }
}

impl HttpBody for Progress {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.deadline = None;
                Poll::Ready(frame)
            }
            Poll::Pending => {
                let idle = this.idle;
                let deadline = this
                    .deadline
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                match deadline.as_mut().poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => {
                        this.stalled.store(true, Ordering::Release);
                        Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!("no byte of the request body came for {idle:?}"),
                        )))))
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}
