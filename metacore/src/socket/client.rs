//! A pooled HTTP/1.1 client for one daemon's Unix socket. Connections are
//! reused (hyper-util's pool); a refused or missing socket is reported as
//! `Unavailable` so callers can answer 503 and retry later; an error
//! envelope comes back as the same [`ApiError`] the daemon sent.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::UnixStream;

use crate::error::{ApiError, ErrorCode, ErrorEnvelope};
use crate::socket::Health;

/// Connects every request to one socket path, whatever the URI's host.
#[derive(Debug, Clone)]
pub struct UnixConnector {
    path: Arc<PathBuf>,
}

/// A Unix stream as hyper-util's pool wants it.
#[derive(Debug)]
pub struct UnixConn(TokioIo<UnixStream>);

impl Connection for UnixConn {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for UnixConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for UnixConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl tower::Service<Uri> for UnixConnector {
    type Response = UnixConn;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<UnixConn>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        let path = self.path.clone();
        Box::pin(async move { Ok(UnixConn(TokioIo::new(UnixStream::connect(&*path).await?))) })
    }
}

/// What can go wrong calling a daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answers on the socket (not started, restarting, gone).
    #[error("{daemon} is unavailable at {path}: {source}")]
    Unavailable {
        daemon: String,
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The daemon answered with an error envelope.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The daemon answered something we cannot read.
    #[error("{daemon} answered {status} with a body we cannot read: {detail}")]
    Protocol {
        daemon: String,
        status: StatusCode,
        detail: String,
    },
}

impl From<ClientError> for ApiError {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Api(api) => api,
            ClientError::Unavailable { daemon, .. } => ApiError::new(
                ErrorCode::StorageUnavailable,
                format!("{daemon} is unavailable, retry shortly"),
            ),
            ClientError::Protocol { .. } => ApiError::internal(e.to_string()),
        }
    }
}

/// A client for one daemon's socket.
#[derive(Debug, Clone)]
pub struct SocketClient {
    daemon: String,
    path: PathBuf,
    client: Client<UnixConnector, Full<Bytes>>,
}

impl SocketClient {
    pub fn new(daemon: impl Into<String>, path: &Path) -> Self {
        let connector = UnixConnector {
            path: Arc::new(path.to_owned()),
        };
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(64)
            .build(connector);
        Self {
            daemon: daemon.into(),
            path: path.to_owned(),
            client,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The daemon's name, as errors show it.
    pub fn daemon(&self) -> &str {
        &self.daemon
    }

    /// Sends a request and returns the raw response when its status is a
    /// success; an error status is decoded into [`ClientError::Api`].
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Bytes>,
    ) -> Result<http::Response<Incoming>, ClientError> {
        let resp = self.exchange(method, path_and_query, body).await?;
        self.accepted(resp).await
    }

    /// `resp` when its status is a success, else its error decoded
    /// ([`Self::refusal`]).
    pub async fn accepted(
        &self,
        resp: http::Response<Incoming>,
    ) -> Result<http::Response<Incoming>, ClientError> {
        if resp.status().is_success() {
            Ok(resp)
        } else {
            Err(self.refusal(resp).await)
        }
    }

    /// Sends a request and returns the response whatever its status
    /// (what a relay passes on, headers and all).
    pub async fn exchange(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Bytes>,
    ) -> Result<http::Response<Incoming>, ClientError> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("http://{}{}", self.daemon, path_and_query));
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| ApiError::bad_request(format!("cannot build request: {e}")))?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| ClientError::Unavailable {
                daemon: self.daemon.clone(),
                path: self.path.clone(),
                source: Box::new(e),
            })?;
        Ok(resp)
    }

    /// An error answer decoded: [`ClientError::Api`] with the peer's
    /// envelope, or [`ClientError::Protocol`] when it sent none.
    pub async fn refusal(&self, resp: http::Response<Incoming>) -> ClientError {
        let status = resp.status();
        let bytes = match self.collect(resp).await {
            Ok(bytes) => bytes,
            Err(e) => return e,
        };
        match serde_json::from_slice::<ErrorEnvelope>(&bytes) {
            Ok(env) => ClientError::Api(ApiError::from_envelope(status, env)),
            Err(_) => ClientError::Protocol {
                daemon: self.daemon.clone(),
                status,
                detail: String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned(),
            },
        }
    }

    async fn collect(&self, resp: http::Response<Incoming>) -> Result<Bytes, ClientError> {
        let status = resp.status();
        resp.into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|e| ClientError::Protocol {
                daemon: self.daemon.clone(),
                status,
                detail: e.to_string(),
            })
    }

    /// Sends `body` as JSON (if any) and decodes a JSON answer.
    pub async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let body = match body {
            Some(b) => Some(Bytes::from(
                serde_json::to_vec(b).map_err(|e| ApiError::internal(e.to_string()))?,
            )),
            None => None,
        };
        let resp = self.send(method, path_and_query, body).await?;
        let status = resp.status();
        let bytes = self.collect(resp).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol {
            daemon: self.daemon.clone(),
            status,
            detail: format!("{e} (is the daemon a different version?)"),
        })
    }

    /// GETs `path_and_query` and returns the body as text (`/metrics`,
    /// whose answer is OpenMetrics text, not JSON).
    pub async fn get_text(&self, path_and_query: &str) -> Result<String, ClientError> {
        let resp = self.send(Method::GET, path_and_query, None).await?;
        let status = resp.status();
        let bytes = self.collect(resp).await?;
        String::from_utf8(bytes.into()).map_err(|e| ClientError::Protocol {
            daemon: self.daemon.clone(),
            status,
            detail: format!("the answer is not UTF-8 text: {e}"),
        })
    }

    pub async fn get<T: DeserializeOwned>(&self, path_and_query: &str) -> Result<T, ClientError> {
        self.call::<(), T>(Method::GET, path_and_query, None).await
    }

    /// `GET /health`, refusing a peer that speaks another socket protocol
    /// with a sentence an operator can act on ([`Health::mismatch`]).
    pub async fn handshake(&self) -> Result<Health, ClientError> {
        let health: Health = self.get("/health").await?;
        match health.mismatch() {
            None => Ok(health),
            Some(why) => Err(ClientError::Protocol {
                daemon: self.daemon.clone(),
                status: StatusCode::OK,
                detail: why,
            }),
        }
    }
}

/// A [`SocketClient`] whose calls go only to a peer that said it speaks
/// this build's socket protocol: asked before the first call, and again
/// after the peer could not be reached (a restart may bring another
/// build). A peer of another protocol gets no request but the handshake.
#[derive(Debug, Clone)]
pub struct AgreedClient {
    inner: SocketClient,
    /// Whether the peer's protocol was checked since it was last
    /// unreachable; shared by the clones, which call one peer.
    agreed: Arc<AtomicBool>,
}

impl AgreedClient {
    pub fn new(inner: SocketClient) -> Self {
        Self {
            inner,
            agreed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The socket without the check, for `/health`, `/status` and
    /// `/metrics`, whose answers say the peer's version themselves.
    pub fn socket(&self) -> &SocketClient {
        &self.inner
    }

    async fn agree(&self) -> Result<(), ClientError> {
        if !self.agreed.load(Ordering::Acquire) {
            self.inner
                .handshake()
                .await
                .inspect_err(|e| self.forget(e))?;
            self.agreed.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// After an unreachable peer, the next call asks its protocol again.
    fn forget(&self, e: &ClientError) {
        if matches!(e, ClientError::Unavailable { .. }) {
            self.agreed.store(false, Ordering::Release);
        }
    }

    /// [`SocketClient::send`] to an agreed peer.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Bytes>,
    ) -> Result<http::Response<Incoming>, ClientError> {
        let resp = self.exchange(method, path_and_query, body).await?;
        self.inner.accepted(resp).await
    }

    /// [`SocketClient::exchange`] with an agreed peer.
    pub async fn exchange(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Bytes>,
    ) -> Result<http::Response<Incoming>, ClientError> {
        self.agree().await?;
        let sent = self.inner.exchange(method, path_and_query, body).await;
        sent.inspect_err(|e| self.forget(e))
    }

    /// [`SocketClient::call`] to an agreed peer.
    pub async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        self.agree().await?;
        let called = self.inner.call(method, path_and_query, body).await;
        called.inspect_err(|e| self.forget(e))
    }
}
