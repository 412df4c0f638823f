//! A request body must keep coming: one that goes
//! `META_CORE_HTTP_BODY_TIMEOUT_MS` without a byte fails, so a client
//! cannot hold a request (and its slot, its buffers) open by trickling or
//! stopping. The wait starts when the handler first waits for the body,
//! and starts again with each piece that arrives.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use tokio::time::Sleep;

/// The middleware: every request's body under the progress limit.
pub(crate) async fn limit(req: Request, next: Next, idle: Duration) -> Response {
    next.run(req.map(|b| Body::new(Progress::new(b, idle))))
        .await
}

struct Progress {
    inner: Body,
    idle: Duration,
    /// Armed while the body is awaited and nothing comes.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl Progress {
    fn new(inner: Body, idle: Duration) -> Self {
        Self {
            inner,
            idle,
            deadline: None,
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
