//! `GET /metrics`, open like `/health`: the whole tree's metrics as one
//! OpenMetrics exposition. apid's own ([`crate::metrics`]), and each other
//! part's socket `/metrics` (the supervisor's daemon table, storaged,
//! watcherd, mountd) asked at once, each given [`PART_TIMEOUT`]; a part
//! that does not answer in time is left out and
//! `metacore_scrape_ok{daemon="..."} 0` says so. On apid's socket,
//! `/metrics` is apid's own part alone.

use std::future::Future;
use std::time::{Duration, Instant};

use axum::response::Response;
use metacore::layout::Daemon;
use metacore::metrics::{Part, Scraped};
use metacore::socket::client::ClientError;

use crate::state::{AppState, State};

/// How long each part gets to answer.
pub(crate) const PART_TIMEOUT: Duration = Duration::from_secs(2);

/// Asks one part for its exposition, within [`PART_TIMEOUT`].
async fn scrape(part: Part, ask: impl Future<Output = Result<String, ClientError>>) -> Scraped {
    let started = Instant::now();
    let text = match tokio::time::timeout(PART_TIMEOUT, ask).await {
        Ok(Ok(text)) => Some(text),
        Ok(Err(e)) => {
            tracing::debug!(daemon = part.name(), "left out of /metrics: {e}");
            None
        }
        Err(_) => {
            tracing::warn!(
                daemon = part.name(),
                "left out of /metrics: no answer within {PART_TIMEOUT:?}"
            );
            None
        }
    };
    Scraped {
        part,
        text,
        took: started.elapsed(),
    }
}

/// apid's own part: its requests ([`crate::metrics`]) and its event
/// streams ([`crate::events`]).
fn own(st: &AppState) -> Result<String, metacore::metrics::RenderError> {
    let mut r = crate::metrics::registry(&st.requests);
    st.events.register_metrics(&mut r);
    metacore::metrics::render(&[&r])
}

/// The public `GET /metrics`.
pub(crate) async fn public(st: State) -> Response {
    let own = async {
        let started = Instant::now();
        let text = own(&st)
            .inspect_err(|e| tracing::error!(error = %e, "cannot render apid's metrics"))
            .ok();
        Scraped {
            part: Part::Daemon(Daemon::Apid),
            text,
            took: started.elapsed(),
        }
    };
    let (supervisor, storaged, apid, watcherd, mountd) = tokio::join!(
        scrape(Part::Supervisor, st.supervisor.metrics()),
        scrape(Part::Daemon(Daemon::Storaged), st.store.metrics()),
        own,
        scrape(Part::Daemon(Daemon::Watcherd), st.watcherd.metrics()),
        scrape(Part::Daemon(Daemon::Mountd), st.mountd.metrics()),
    );
    metacore::metrics::answer(metacore::metrics::join(&[
        supervisor, storaged, apid, watcherd, mountd,
    ]))
}

/// `GET /metrics` on apid's socket: apid's own part.
pub(crate) async fn internal(st: State) -> Response {
    metacore::metrics::answer(own(&st))
}
