//! What watcherd's and mountd's sockets answer alike (`/health`, `/status`,
//! `/metrics`) and one client for both: [`DaemonClient`], typed by the
//! daemon's status. What a daemon adds (watcherd's `/scan`) is an `impl` on
//! its own client type beside its wire types.

use std::fmt;
use std::marker::PhantomData;
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::layout::Daemon;
use crate::socket::Health;
use crate::socket::client::{AgreedClient, ClientError, SocketClient};

/// A daemon's `/status` answer, which names the daemon its client talks to.
pub trait DaemonStatus: DeserializeOwned {
    const DAEMON: Daemon;
}

/// A client of one daemon's socket. Every call but `/health`, `/status`
/// and `/metrics` goes to a daemon that said it speaks this build's socket
/// protocol ([`AgreedClient`]).
pub struct DaemonClient<S> {
    inner: AgreedClient,
    status: PhantomData<fn() -> S>,
}

impl<S> Clone for DaemonClient<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            status: PhantomData,
        }
    }
}

impl<S: DaemonStatus> fmt::Debug for DaemonClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DaemonClient")
            .field("daemon", &S::DAEMON)
            .field("inner", &self.inner)
            .finish()
    }
}

impl<S: DaemonStatus> DaemonClient<S> {
    pub fn new(socket: &Path) -> Self {
        Self {
            inner: AgreedClient::new(SocketClient::new(S::DAEMON.name(), socket)),
            status: PhantomData,
        }
    }

    /// The socket, its protocol checked: what apid relays the daemon's API
    /// through.
    pub fn agreed(&self) -> &AgreedClient {
        &self.inner
    }

    /// The socket without the protocol check.
    pub fn socket(&self) -> &SocketClient {
        self.inner.socket()
    }

    pub async fn health(&self) -> Result<Health, ClientError> {
        self.socket().get("/health").await
    }

    /// `GET /metrics`: the daemon's metrics, OpenMetrics text
    /// ([`crate::metrics`]).
    pub async fn metrics(&self) -> Result<String, ClientError> {
        self.socket().get_text("/metrics").await
    }

    pub async fn status(&self) -> Result<S, ClientError> {
        self.socket().get("/status").await
    }
}
