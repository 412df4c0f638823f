//! The stream methods of [`Store`]: appends of checked entries to
//! `file:events` (`meta:events` is written only by the engine),
//! range reads, info, and the committed heads that tails wait on.

use metacore::api::storaged::{Entries, StreamBounds, StreamInfo};
use metacore::checked::CheckedEntry;
use metacore::stream::{Entry, StreamId, StreamName};
use tokio::sync::watch;

use super::Store;
use crate::error::Result;
use crate::streams::{self, Heads};

impl Store {
    /// Appends a checked entry (`meta:events` is written only by the
    /// engine: no [`CheckedEntry`] names it).
    pub async fn append(&self, entry: CheckedEntry) -> Result<StreamId> {
        self.writer
            .write(move |tx| {
                let stream = entry.stream();
                tx.streams.append(tx.conn, stream, entry.json(), tx.now_ms)
            })
            .await
    }

    pub async fn entries(
        &self,
        stream: StreamName,
        after: Option<StreamId>,
        limit: u32,
    ) -> Result<Vec<Entry>> {
        self.readers
            .read(move |c| streams::read_after(c, stream, after, limit))
            .await
    }

    /// A page of entries after `after` and the oldest entry kept, read in
    /// one transaction (a reader can tell whether its cursor was trimmed
    /// past).
    pub async fn entries_page(
        &self,
        stream: StreamName,
        after: Option<StreamId>,
        limit: u32,
    ) -> Result<Entries> {
        self.readers
            .read(move |c| {
                let tx = c.unchecked_transaction()?;
                Ok(Entries {
                    entries: streams::read_after(&tx, stream, after, limit)?,
                    first: streams::first_id(&tx, stream)?,
                })
            })
            .await
    }

    /// The oldest entry kept and the head: two index lookups.
    pub async fn stream_bounds(&self, stream: StreamName) -> Result<StreamBounds> {
        let last = streams::head_of(&self.heads.borrow(), stream);
        self.readers
            .read(move |c| {
                let tx = c.unchecked_transaction()?;
                Ok(StreamBounds {
                    first: streams::first_id(&tx, stream)?,
                    last: streams::high_water_mark(&tx, stream)?.max(last),
                })
            })
            .await
    }

    pub async fn stream_info(&self, stream: StreamName) -> Result<StreamInfo> {
        let last = streams::head_of(&self.heads.borrow(), stream);
        // Counting the entries walks up to the retention: off the runtime.
        self.readers
            .read(move |c| {
                let tx = c.unchecked_transaction()?;
                let hwm = streams::high_water_mark(&tx, stream)?;
                Ok(StreamInfo {
                    stream: stream.to_string(),
                    first: streams::first_id(&tx, stream)?,
                    last: hwm.max(last),
                    length: streams::length(&tx, stream)?,
                })
            })
            .await
    }

    /// A receiver of the committed heads, to wait for new entries.
    pub fn subscribe(&self) -> watch::Receiver<Heads> {
        self.heads.clone()
    }
}
