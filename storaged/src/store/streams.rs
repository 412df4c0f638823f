//! The stream methods of [`Store`]: appends to `file:events` (checked
//! before they are queued; `meta:events` is written only by the engine),
//! range reads, info, and the committed heads that tails wait on.

use metacore::api::storaged::StreamInfo;
use metacore::stream::{Entry, EntryFields, StreamId, StreamName};
use tokio::sync::watch;

use super::Store;
use crate::error::{Result, schema as reject};
use crate::streams::{self, Heads};

/// Largest stream entry accepted, in bytes of JSON.
const MAX_ENTRY_BYTES: usize = 64 * 1024;

impl Store {
    /// Appends an entry; `meta:events` is written only by the engine.
    pub async fn append(&self, stream: StreamName, fields: EntryFields) -> Result<StreamId> {
        if stream == StreamName::Meta {
            return Err(reject(
                "meta:events is written by storaged itself, in the transaction of each change",
            ));
        }
        match fields.get("type") {
            Some(t) if !t.is_empty() => {}
            _ => return Err(reject("an entry needs a non-empty \"type\" field")),
        }
        if fields
            .iter()
            .any(|(k, v)| k.is_empty() || k.contains('\0') || v.contains('\0'))
        {
            return Err(reject(
                "entry field names are non-empty and no name or value contains NUL",
            ));
        }
        let json = serde_json::to_string(&fields).expect("strings serialize");
        if json.len() > MAX_ENTRY_BYTES {
            return Err(reject(format!(
                "an entry is at most {MAX_ENTRY_BYTES} bytes of JSON"
            )));
        }
        self.writer
            .write(move |tx| tx.streams.append(tx.conn, stream, &json, tx.now_ms))
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
