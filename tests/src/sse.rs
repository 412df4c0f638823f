//! A real SSE follower of apid: one `GET` over its own TCP connection
//! (hyper's HTTP/1.1 client), the body parsed by `eventsource-stream`, a
//! parser of the WHATWG event-stream format written by others, so what the
//! tests see is what a follower of the mesh sees. The raw bytes are kept
//! too, for what a parser hides: framing, comments, which events carry an
//! `id:` line.
//!
//! Every wait is bounded: [`Follower::next`] gives up after a deadline and
//! says so instead of hanging.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, Eventsource};
use futures_util::{Stream, StreamExt};
use http::{HeaderMap, Request};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::wait::IO_DEADLINE;

type Events = Pin<Box<dyn Stream<Item = Result<Event, String>> + Send>>;

/// One event as a follower receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The event's last event ID (the spec's: it carries over from the
    /// last event that set one; the raw bytes say which did).
    pub id: String,
    pub event: String,
    pub data: serde_json::Value,
}

impl Received {
    /// A string field of the data.
    pub fn field(&self, name: &str) -> &str {
        self.data[name]
            .as_str()
            .unwrap_or_else(|| panic!("{name} is not a string in {}", self.data))
    }
}

/// What [`Follower::next`] saw.
#[derive(Debug)]
pub enum Next {
    Event(Received),
    /// The server ended the response.
    End,
    /// The connection broke mid-response (the server was killed).
    Broken(String),
    /// Nothing within the deadline.
    Quiet,
}

/// One open event stream.
pub struct Follower {
    pub status: u16,
    pub headers: HeaderMap,
    events: Events,
    raw: Arc<Mutex<Vec<u8>>>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl Follower {
    /// `GET path` on `127.0.0.1:port` with `Last-Event-ID` when given.
    pub async fn connect(port: u16, path: &str, last_event_id: Option<&str>) -> Self {
        Self::connect_with(port, path, &[("last-event-id", last_event_id)]).await
    }

    /// `GET path` with the headers whose value is `Some`.
    pub async fn connect_with(port: u16, path: &str, headers: &[(&str, Option<&str>)]) -> Self {
        Self::open(port, path, headers, true)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `GET path` with the headers whose value is `Some`; a refused or
    /// broken connection, or no answer within [`IO_DEADLINE`], is an
    /// error rather than a panic (for followers that reconnect while the
    /// server restarts). Without `keep_raw`, the raw bytes are not kept
    /// (a long-running follower would hold every byte it was sent).
    pub async fn open(
        port: u16,
        path: &str,
        headers: &[(&str, Option<&str>)],
        keep_raw: bool,
    ) -> Result<Self, String> {
        let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build_http();
        let mut req = Request::get(format!("http://127.0.0.1:{port}{path}"));
        for (k, v) in headers {
            if let Some(v) = v {
                req = req.header(*k, *v);
            }
        }
        let req = req.body(Empty::new()).expect("a request");
        let resp = tokio::time::timeout(IO_DEADLINE, client.request(req))
            .await
            .map_err(|_| format!("GET {path}: no answer within {IO_DEADLINE:?}"))?
            .map_err(|e| format!("GET {path}: {e}"))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let raw = Arc::new(Mutex::new(Vec::new()));
        let tee = raw.clone();
        let body = resp.into_body().into_data_stream().map(move |chunk| {
            let chunk = chunk.map_err(|e| e.to_string())?;
            if keep_raw {
                tee.lock().unwrap().extend_from_slice(&chunk);
            }
            Ok::<_, String>(chunk)
        });
        let events = body
            .eventsource()
            .map(|r| r.map_err(|e| e.to_string()))
            .boxed();
        Ok(Self {
            status,
            headers,
            events,
            raw,
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The next event, the end of the stream, or quiet after `deadline`.
    pub async fn next(&mut self, deadline: Duration) -> Next {
        match tokio::time::timeout(deadline, self.events.next()).await {
            Err(_) => Next::Quiet,
            Ok(None) => Next::End,
            Ok(Some(Err(e))) => Next::Broken(e),
            Ok(Some(Ok(e))) => Next::Event(Received {
                data: serde_json::from_str(&e.data)
                    .unwrap_or_else(|err| panic!("data is not JSON ({err}): {:?}", e.data)),
                id: e.id,
                event: e.event,
            }),
        }
    }

    /// The next event, which must come within [`IO_DEADLINE`].
    pub async fn event(&mut self) -> Received {
        match self.next(IO_DEADLINE).await {
            Next::Event(e) => e,
            other => panic!("expected an event, got {other:?}"),
        }
    }

    /// The next `n` events.
    pub async fn take(&mut self, n: usize) -> Vec<Received> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match self.next(IO_DEADLINE).await {
                Next::Event(e) => out.push(e),
                other => panic!("expected {n} events, got {} then {other:?}", out.len()),
            }
        }
        out
    }

    /// Events until the stream ends (bounded by `IO_DEADLINE` of silence).
    pub async fn until_end(&mut self) -> Vec<Received> {
        let mut out = Vec::new();
        loop {
            match self.next(IO_DEADLINE).await {
                Next::Event(e) => out.push(e),
                Next::End => return out,
                Next::Quiet => panic!("the stream did not end; {} events so far", out.len()),
                Next::Broken(e) => panic!("the stream broke after {} events: {e}", out.len()),
            }
        }
    }

    /// Asserts that nothing arrives for `quiet` (keep-alives aside).
    pub async fn assert_quiet(&mut self, quiet: Duration) {
        match self.next(quiet).await {
            Next::Quiet => {}
            other => panic!("expected nothing, got {other:?}"),
        }
    }

    /// Everything received so far, as text.
    pub fn raw(&self) -> String {
        String::from_utf8(self.raw.lock().unwrap().clone()).expect("the stream is UTF-8")
    }

    /// The raw event blocks received so far (comments dropped), each as
    /// its lines.
    pub fn blocks(&self) -> Vec<Vec<String>> {
        self.raw()
            .split("\n\n")
            .map(|b| {
                b.split('\n')
                    .filter(|l| !l.is_empty() && !l.starts_with(':'))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .filter(|b| !b.is_empty())
            .collect()
    }
}

/// `n` followers of `path` without an ID. Each has its answer's headers
/// when this returns, so each has captured its head: everything written
/// afterwards reaches all of them.
pub async fn connect_all(port: u16, path: &str, n: usize) -> Vec<Follower> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(Follower::connect(port, path, None).await);
    }
    out
}
