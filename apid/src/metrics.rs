//! apid's own metrics: requests by route template, method and status, their
//! latency, requests in flight (counted by [`track`], the public router's
//! outermost layer); the request-body budget in use. [`registry`] reads
//! them at scrape time; `routes::metrics` adds the event streams' own
//! (counted by [`crate::events`]), serves the lot on apid's socket and
//! joins it with the other parts' on the public `/metrics`. This module
//! knows nothing of apid's state, so it stays out of the state's circle.
//!
//! A route's label is the template axum matched (`/meta/{hash}`), never the
//! path asked for, and every request no route matched shares one value,
//! `unmatched`: no record id, CID or path becomes a label.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use metacore::layout::Daemon;
use metacore::metrics::Part;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Unit;

/// Upper bounds of the latency buckets, in seconds: 0.5 ms to 10 s.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The route template a request matched, or none (`unmatched`). A clone
/// shares the router's string: no allocation per request.
#[derive(Debug, Clone)]
pub(crate) struct Route(Option<MatchedPath>);

impl Route {
    fn as_str(&self) -> &str {
        self.0.as_ref().map_or("unmatched", MatchedPath::as_str)
    }
}

impl PartialEq for Route {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Route {}

impl Hash for Route {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl EncodeLabelValue for Route {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

/// A request's method: the ones apid serves (WebDAV's included), and one
/// value for any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Method(&'static str);

impl Method {
    fn of(m: &http::Method) -> Self {
        let name = m.as_str();
        Method(
            crate::methods::METHODS
                .into_iter()
                .find(|k| *k == name)
                .unwrap_or("OTHER"),
        )
    }
}

impl EncodeLabelValue for Method {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.0, encoder)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    route: Route,
    method: Method,
    status: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RouteLabels {
    route: Route,
    method: Method,
}

type Histograms = Family<RouteLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// What apid counts of its requests.
#[derive(Debug, Clone)]
pub(crate) struct Requests {
    answered: Family<RequestLabels, Counter>,
    latency: Histograms,
    in_flight: Gauge,
}

impl Default for Requests {
    fn default() -> Self {
        Self {
            answered: Family::default(),
            latency: Histograms::new_with_constructor(latency_histogram),
            in_flight: Gauge::default(),
        }
    }
}

/// Takes a request out of the in-flight count however it ends (answered,
/// or dropped with its connection).
struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Middleware of the public router: counts each request by its route
/// template, method and status, and the time to its answer's head (an
/// event stream or a download goes on after it).
pub(crate) async fn track(State(m): State<Arc<Requests>>, req: Request, next: Next) -> Response {
    let route = Route(req.extensions().get::<MatchedPath>().cloned());
    let method = Method::of(req.method());
    m.in_flight.inc();
    let _in_flight = InFlight(&m.in_flight);
    let started = Instant::now();
    let resp = next.run(req).await;
    let took = started.elapsed().as_secs_f64();
    let labels = RouteLabels { route, method };
    m.latency.get_or_create(&labels).observe(took);
    m.answered
        .get_or_create(&RequestLabels {
            route: labels.route,
            method,
            status: resp.status().as_u16(),
        })
        .inc();
    resp
}

/// apid's request metrics in a registry; its event streams add theirs
/// (`routes::metrics` joins them).
pub(crate) fn registry(m: &Requests) -> prometheus_client::registry::Registry {
    let mut r = metacore::metrics::registry();
    metacore::metrics::register_build_info(&mut r, Part::Daemon(Daemon::Apid));
    r.register(
        "apid_http_requests",
        "Requests answered, by route template (unmatched: no route), method and status",
        m.answered.clone(),
    );
    // In seconds, without a UNIT line (see storaged's commit histogram).
    r.register(
        "apid_http_request_duration_seconds",
        "Time from a request to its answer's head, by route template and method",
        m.latency.clone(),
    );
    r.register(
        "apid_http_requests_in_flight",
        "Requests being answered now (an event stream counts until its answer's head)",
        m.in_flight.clone(),
    );
    r.register_with_unit(
        "apid_request_bodies_in_flight",
        "Request bodies held in memory now, as counted against the body budget",
        Unit::Bytes,
        ConstGauge::new(i64::try_from(metacore::socket::body::budget_in_use()).unwrap_or(i64::MAX)),
    );
    r.register_with_unit(
        "apid_request_body_budget",
        "The most request-body bytes apid holds at once",
        Unit::Bytes,
        ConstGauge::new(i64::try_from(metacore::socket::body::BODY_BUDGET).unwrap_or(i64::MAX)),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_is_one_of_a_fixed_set() {
        assert_eq!(Method::of(&http::Method::PATCH), Method("PATCH"));
        assert_eq!(
            Method::of(&http::Method::from_bytes(b"PROPFIND").unwrap()),
            Method("PROPFIND")
        );
        assert_eq!(
            Method::of(&http::Method::from_bytes(b"BREW").unwrap()),
            Method("OTHER")
        );
    }

    #[test]
    fn a_request_no_route_matched_is_unmatched() {
        assert_eq!(Route(None).as_str(), "unmatched");
    }
}
