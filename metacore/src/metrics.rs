//! Prometheus metrics: what every process shares to answer `GET /metrics`
//! on its socket, and what apid needs to join them into its public one.
//!
//! Each process keeps its own [`Registry`] (made by [`registry`], so every
//! name is `metacore_…`) and renders it with [`render`]; there is no global
//! recorder. Figures a process already counts for its `/status` are read
//! from there at scrape time into a registry made for that scrape, so
//! nothing is counted twice. Labels are typed label sets whose values are
//! enums (a daemon, a stream, a method...): no record id, CID or path can
//! become a label.
//!
//! [`join`] merges the expositions of the parts of the tree into one valid
//! OpenMetrics exposition (each family once, one `# EOF`), and says with
//! `metacore_scrape_ok{daemon}` which parts answered.

use std::collections::HashMap;
use std::time::Duration;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use crate::error::ApiError;
use crate::layout::Daemon;

/// The one version of the client every process builds against.
pub use prometheus_client;

/// The content type of every `/metrics` answer.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The prefix of every metric name.
pub const PREFIX: &str = "metacore";

/// The last line of an exposition.
const EOF: &str = "# EOF";

/// A part of the tree that renders its own metrics: the value of the
/// `daemon` label of `metacore_build_info` and `metacore_scrape_ok`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// `meta-core` itself: its control socket.
    Supervisor,
    Daemon(Daemon),
}

impl Part {
    /// Every part, the supervisor first, then the daemons in start order.
    pub const ALL: [Part; 5] = [
        Part::Supervisor,
        Part::Daemon(Daemon::Storaged),
        Part::Daemon(Daemon::Apid),
        Part::Daemon(Daemon::Watcherd),
        Part::Daemon(Daemon::Mountd),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Part::Supervisor => "supervisor",
            Part::Daemon(d) => d.name(),
        }
    }
}

impl EncodeLabelValue for Part {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.name(), encoder)
    }
}

impl EncodeLabelValue for Daemon {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.name(), encoder)
    }
}

impl EncodeLabelValue for crate::api::supervisor::DaemonState {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

impl EncodeLabelValue for crate::stream::StreamName {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

/// The label set of a figure per stream (`stream="meta:events"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct StreamLabels {
    pub stream: crate::stream::StreamName,
}

/// The label set of a figure per part (`daemon="storaged"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PartLabels {
    pub daemon: Part,
}

/// The label set of a figure per supervised daemon.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DaemonLabels {
    pub daemon: Daemon,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BuildLabels {
    daemon: Part,
    version: &'static str,
    /// The internal socket protocol ([`crate::socket::PROTOCOL_VERSION`]).
    protocol: u32,
}

/// A registry whose metrics are named `metacore_<name>`.
pub fn registry() -> Registry {
    Registry::with_prefix(PREFIX)
}

/// Registers `metacore_build_info{daemon, version, protocol} 1`.
pub fn register_build_info(registry: &mut Registry, part: Part) {
    registry.register(
        "build",
        "The build of this part of meta-core: its version and socket protocol",
        Info::new(BuildLabels {
            daemon: part,
            version: env!("CARGO_PKG_VERSION"),
            protocol: crate::socket::PROTOCOL_VERSION,
        }),
    );
}

/// Why metrics could not be rendered.
#[derive(Debug, thiserror::Error)]
#[error("cannot render the metrics")]
pub struct RenderError(#[from] std::fmt::Error);

/// The registries as one exposition, ending with `# EOF`. The registries
/// must not share a metric name.
pub fn render(registries: &[&Registry]) -> Result<String, RenderError> {
    let mut out = String::with_capacity(4096);
    for r in registries {
        encode_registry(&mut out, r)?;
    }
    encode_eof(&mut out)?;
    Ok(out)
}

/// The answer of a `GET /metrics`: the exposition with its content type,
/// or a 500 with the error envelope.
pub fn answer(text: Result<String, RenderError>) -> axum::response::Response {
    use axum::response::IntoResponse;
    match text {
        Ok(text) => ([(http::header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot render the metrics");
            ApiError::internal("cannot render the metrics").into_response()
        }
    }
}

/// One part's exposition as it was fetched.
#[derive(Debug)]
pub struct Scraped {
    pub part: Part,
    /// The exposition, or `None` when the part did not answer in time.
    pub text: Option<String>,
    /// How long the part took to answer, or to be given up on.
    pub took: Duration,
}

/// One metric family of an exposition: its metadata lines, then its
/// samples.
#[derive(Debug)]
struct FamilyText<'a> {
    name: &'a str,
    kind: Option<&'a str>,
    meta: Vec<&'a str>,
    samples: Vec<&'a str>,
}

/// An exposition that is not one this module can join (cut short, or not
/// OpenMetrics text).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a whole OpenMetrics exposition: {0}")]
pub struct Malformed(&'static str);

/// The families of `text`, which must end with `# EOF`.
fn families(text: &str) -> Result<Vec<FamilyText<'_>>, Malformed> {
    let body = text
        .strip_suffix('\n')
        .unwrap_or(text)
        .strip_suffix(EOF)
        .ok_or(Malformed("it does not end with # EOF"))?;
    let mut out: Vec<FamilyText<'_>> = Vec::new();
    for line in body.lines() {
        if let Some(meta) = line.strip_prefix("# ") {
            let mut words = meta.splitn(3, ' ');
            let (Some(what), Some(name)) = (words.next(), words.next()) else {
                return Err(Malformed("a metadata line without a name"));
            };
            if !matches!(what, "HELP" | "TYPE" | "UNIT") {
                return Err(Malformed("a comment that is not HELP, TYPE or UNIT"));
            }
            if out.last().is_none_or(|f| f.name != name) {
                out.push(FamilyText {
                    name,
                    kind: None,
                    meta: Vec::new(),
                    samples: Vec::new(),
                });
            }
            let family = out.last_mut().ok_or(Malformed("no family"))?;
            if what == "TYPE" {
                family.kind = words.next();
            }
            family.meta.push(line);
        } else {
            let family = out
                .last_mut()
                .ok_or(Malformed("a sample before any metadata"))?;
            let sample_name = line.split(['{', ' ']).next().unwrap_or("");
            if line.starts_with('#') || !sample_name.starts_with(family.name) {
                return Err(Malformed("a sample outside its family"));
            }
            family.samples.push(line);
        }
    }
    Ok(out)
}

/// The expositions of `parts` as one: each family once (the samples of
/// the same family from several parts together under its first metadata),
/// then `metacore_scrape_ok{daemon}` (1 for a part that answered a whole
/// exposition, 0 for one that did not answer, answered late, or answered
/// something cut short, which is left out) and
/// `metacore_scrape_duration_seconds{daemon}`, then one `# EOF`.
pub fn join(parts: &[Scraped]) -> Result<String, RenderError> {
    let ok = Family::<PartLabels, Gauge>::default();
    let took = Family::<PartLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let mut joined: Vec<FamilyText<'_>> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for p in parts {
        let labels = PartLabels { daemon: p.part };
        took.get_or_create(&labels).set(p.took.as_secs_f64());
        let fams = match p.text.as_deref().map(families) {
            Some(Ok(f)) => f,
            Some(Err(e)) => {
                tracing::warn!(daemon = p.part.name(), "left out of /metrics: {e}");
                ok.get_or_create(&labels).set(0);
                continue;
            }
            None => {
                ok.get_or_create(&labels).set(0);
                continue;
            }
        };
        ok.get_or_create(&labels).set(1);
        for f in fams {
            match index.get(f.name) {
                Some(&i) if joined[i].kind == f.kind => joined[i].samples.extend(f.samples),
                Some(_) => tracing::warn!(
                    daemon = p.part.name(),
                    family = f.name,
                    "left out of /metrics: another part has this family with another type"
                ),
                None => {
                    index.insert(f.name, joined.len());
                    joined.push(f);
                }
            }
        }
    }
    let mut scrape = registry();
    scrape.register(
        "scrape_ok",
        "Whether this part of meta-core answered its /metrics in time (1) or is left out (0)",
        ok,
    );
    scrape.register_with_unit(
        "scrape_duration",
        "How long this part of meta-core took to answer its /metrics",
        Unit::Seconds,
        took,
    );
    let mut out = String::with_capacity(
        parts
            .iter()
            .filter_map(|p| p.text.as_ref())
            .map(String::len)
            .sum::<usize>()
            + 1024,
    );
    for f in &joined {
        for line in f.meta.iter().chain(&f.samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    encode_registry(&mut out, &scrape)?;
    encode_eof(&mut out)?;
    Ok(out)
}

#[cfg(test)]
#[path = "metrics_test.rs"]
mod tests;
