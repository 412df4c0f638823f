//! How many uploads, copies and listings run at once: a bounded number in
//! all ([`UPLOADS`], [`LISTINGS`]), and within that a bounded share per
//! client ([`UPLOADS_PER_CLIENT`], [`LISTINGS_PER_CLIENT`]; a client is
//! an IPv4 address or an IPv6 /64, [`crate::conn::Client`]), so that one
//! client cannot take every slot: a body that trickles a byte at a time
//! stays under the body timeout and holds its upload's slot as long as
//! it likes.
//!
//! A request takes its client's share first: past it, a 429
//! `too_many_requests` at once (the client is the one to slow down, and
//! waiting would only hold one more of its connections). Within it, a
//! request that finds every slot taken waits up to [`SLOT_WAIT`] for one,
//! then is a 503 `overloaded`. Both come with `Retry-After`.
//!
//! An upload or a copy is done when its handler returns; a listing is
//! not: dav-server writes the multistatus as the client reads it, so a
//! listing's [`Turn`] goes with its answer's body ([`Turn::hold_by`]).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use metacore::error::{ApiError, ErrorCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::conn::{Client, Held, PerClient};

/// Uploads and copies (PUT, PATCH, COPY) written at once; an upload
/// holds up to 1 MiB of gathered bytes.
pub(crate) const UPLOADS: usize = 16;
/// Uploads and copies one client writes at once: a quarter of
/// [`UPLOADS`], so that four clients at their share still leave room.
pub(crate) const UPLOADS_PER_CLIENT: usize = 4;
/// PROPFINDs answered at once: a listing holds a blocking thread while
/// its client reads (a client that stops reading is cut off by
/// `META_CORE_HTTP_WRITE_STALL_MS`), so they are bounded well below
/// tokio's pool of 512.
pub(crate) const LISTINGS: usize = 32;
/// PROPFINDs one client has answered at once: a quarter of [`LISTINGS`];
/// a file manager lists a folder or two at a time.
pub(crate) const LISTINGS_PER_CLIENT: usize = 8;
/// How long a request waits for a slot before 503.
pub(crate) const SLOT_WAIT: Duration = Duration::from_secs(10);

/// One kind of bounded work: its slots in all and each client's share.
#[derive(Debug)]
struct Pool {
    /// The slots in all ([`UPLOADS`] or [`LISTINGS`]); a request waits
    /// for one up to [`SLOT_WAIT`].
    slots: Arc<Semaphore>,
    /// Each client's share of them; taken before a slot, never waited for.
    shares: Arc<PerClient>,
    /// What the answers call this work ("uploads and copies").
    what: &'static str,
}

/// The pools of WebDAV work, kept for apid's life.
#[derive(Debug)]
pub(crate) struct Turns {
    uploads: Pool,
    listings: Pool,
}

impl Default for Turns {
    fn default() -> Self {
        Self::new(
            (UPLOADS, UPLOADS_PER_CLIENT),
            (LISTINGS, LISTINGS_PER_CLIENT),
        )
    }
}

/// A request's place in a pool, given back when dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    _share: Option<Held>,
    _slot: OwnedSemaphorePermit,
}

impl Turn {
    /// `body`, holding this turn until it has been sent or dropped.
    pub(crate) fn hold_by(self, body: Body) -> Body {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _held = &self;
            chunk
        }))
    }
}

impl Turns {
    /// Pools of `(slots, per client)` for uploads and for listings.
    fn new(uploads: (usize, usize), listings: (usize, usize)) -> Self {
        let pool = |(slots, share): (usize, usize), what| Pool {
            slots: Arc::new(Semaphore::new(slots)),
            shares: PerClient::new(share),
            what,
        };
        Self {
            uploads: pool(uploads, "uploads and copies"),
            listings: pool(listings, "listings"),
        }
    }

    /// Upload slots free now.
    pub(crate) fn uploads_free(&self) -> usize {
        self.uploads.slots.available_permits()
    }

    /// The turn a request of `method` from `client` needs (`None` for
    /// one that takes no slot), or the answer that refuses it.
    pub(crate) async fn take(
        &self,
        method: &str,
        client: Option<Client>,
    ) -> Result<Option<Turn>, Response> {
        let pool = match method {
            "PUT" | "PATCH" | "COPY" => &self.uploads,
            "PROPFIND" => &self.listings,
            _ => return Ok(None),
        };
        pool.take(client).await.map(Some)
    }
}

impl Pool {
    async fn take(&self, client: Option<Client>) -> Result<Turn, Response> {
        let share = match client {
            Some(c) => match self.shares.try_take(c) {
                Some(held) => Some(held),
                None => {
                    tracing::info!(client = %c, "webdav: a client runs as many {} as one may", self.what);
                    return Err(ApiError::new(
                        ErrorCode::TooManyRequests,
                        format!(
                            "this client has {} {} running, as many as one client may; \
                             retry once one has ended",
                            self.shares.cap(),
                            self.what
                        ),
                    )
                    .into_response());
                }
            },
            // A request that did not come through the accept loop.
            None => None,
        };
        match tokio::time::timeout(SLOT_WAIT, self.slots.clone().acquire_owned()).await {
            Ok(Ok(slot)) => Ok(Turn {
                _share: share,
                _slot: slot,
            }),
            _ => Err(ApiError::new(
                ErrorCode::Overloaded,
                format!(
                    "as many {} are running as apid takes; try again shortly",
                    self.what
                ),
            )
            .into_response()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(last: u8) -> Option<Client> {
        Some(Client::of(std::net::IpAddr::from([192, 0, 2, last])))
    }

    #[tokio::test]
    async fn a_client_past_its_share_is_a_429_at_once_and_others_are_served() {
        let turns = Turns::new((3, 2), (3, 2));
        let a = turns.take("PUT", client(1)).await.unwrap().unwrap();
        let b = turns.take("COPY", client(1)).await.unwrap().unwrap();
        let refused = turns.take("PATCH", client(1)).await.unwrap_err();
        assert_eq!(refused.status(), 429);
        assert!(refused.headers().contains_key(http::header::RETRY_AFTER));
        // Listings are a pool of their own.
        let l = turns.take("PROPFIND", client(1)).await.unwrap().unwrap();
        let other = turns.take("PUT", client(2)).await.unwrap().unwrap();
        assert_eq!(turns.uploads_free(), 0);
        assert!(turns.take("DELETE", client(1)).await.unwrap().is_none());
        drop(a);
        let again = turns.take("PUT", client(1)).await.unwrap().unwrap();
        drop((b, l, other, again));
        assert_eq!(turns.uploads_free(), 3);
    }

    #[tokio::test]
    async fn a_listing_holds_its_turn_until_its_body_is_gone() {
        let turns = Turns::new((1, 1), (1, 1));
        let t = turns.take("PROPFIND", client(1)).await.unwrap().unwrap();
        let body = t.hold_by(Body::from("multistatus"));
        assert_eq!(
            turns
                .take("PROPFIND", client(1))
                .await
                .unwrap_err()
                .status(),
            429
        );
        drop(body);
        assert!(turns.take("PROPFIND", client(1)).await.is_ok());
    }
}
