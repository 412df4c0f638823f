//! The SSE wire form of what a follower receives: LF framing only, `id:`
//! on every live event, `event:` the entry's `type`, `data:` one JSON
//! object of the entry's other fields (all strings).
//!
//! A live entry is encoded once, by the stream's hub, into a [`Batch`], and
//! the same bytes go to every follower.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use metacore::stream::{Entry, StreamId};
use serde::Serialize;
use serde::ser::Serializer;

/// The comment sent after a silence, so followers' read timeouts hold.
pub(crate) const KEEPALIVE: &[u8] = b":keep-alive\n\n";

/// The event name of an entry without a usable `type`.
const UNTYPED: &str = "message";

/// Live entries the hub gathered over one batch window, encoded once and
/// sent as they are to every follower that has none of them yet.
#[derive(Debug, Clone)]
pub(crate) struct Batch {
    /// The last entry's ID.
    pub(crate) last: StreamId,
    /// Every entry's event, back to back.
    bytes: Bytes,
    /// Each entry's ID and where its event ends in `bytes`.
    ends: Arc<[(StreamId, usize)]>,
}

impl Batch {
    /// The events after `cursor`, without copying; `None` when the batch
    /// holds none.
    pub(crate) fn after(&self, cursor: StreamId) -> Option<Bytes> {
        if self.last <= cursor {
            return None;
        }
        let skip = self.ends.partition_point(|(id, _)| *id <= cursor);
        let start = skip.checked_sub(1).map_or(0, |i| self.ends[i].1);
        Some(self.bytes.slice(start..))
    }

    /// How many of the batch's events are after `cursor`.
    pub(crate) fn count_after(&self, cursor: StreamId) -> usize {
        self.ends.len() - self.ends.partition_point(|(id, _)| *id <= cursor)
    }
}

/// A batch being gathered.
#[derive(Debug, Default)]
pub(crate) struct BatchBuilder {
    buf: BytesMut,
    ends: Vec<(StreamId, usize)>,
}

impl BatchBuilder {
    pub(crate) fn push(&mut self, entry: &Entry) {
        self.buf.reserve(64 + entry_len(entry));
        put_entry(&mut self.buf, entry);
        self.ends.push((entry.id, self.buf.len()));
    }

    pub(crate) fn entries(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn last(&self) -> Option<StreamId> {
        self.ends.last().map(|(id, _)| *id)
    }

    /// The batch, or `None` when nothing was pushed.
    pub(crate) fn finish(self) -> Option<Batch> {
        let last = self.last()?;
        Some(Batch {
            last,
            bytes: self.buf.freeze(),
            ends: self.ends.into(),
        })
    }
}

fn entry_len(entry: &Entry) -> usize {
    entry
        .fields
        .iter()
        .map(|(k, v)| k.len() + v.len() + 6)
        .sum()
}

/// The entry's fields but `type`, as one JSON object.
struct Data<'a>(&'a Entry);

impl Serialize for Data<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.fields.iter().filter(|(k, _)| *k != "type"))
    }
}

/// Appends one entry's event to `buf`.
pub(crate) fn put_entry(buf: &mut BytesMut, entry: &Entry) {
    let kind = entry
        .fields
        .get("type")
        .map(String::as_str)
        // Entries are checked when appended; an older row with a line
        // break in its type must still not break the framing.
        .filter(|t| !t.is_empty() && !t.contains(['\r', '\n']))
        .unwrap_or(UNTYPED);
    put_line(buf, "id: ", &entry.id.to_string());
    put_line(buf, "event: ", kind);
    buf.put_slice(b"data: ");
    serde_json::to_writer((&mut *buf).writer(), &Data(entry)).expect("strings serialize");
    buf.put_slice(b"\n\n");
}

/// Appends one `set` event of the `meta` snapshot; `id` only on the last.
pub(crate) fn put_snapshot_set(buf: &mut BytesMut, key: &str, ts: &str, id: Option<StreamId>) {
    #[derive(Serialize)]
    struct Set<'a> {
        key: &'a str,
        ts: &'a str,
    }
    if let Some(id) = id {
        put_line(buf, "id: ", &id.to_string());
    }
    buf.put_slice(b"event: set\ndata: ");
    serde_json::to_writer((&mut *buf).writer(), &Set { key, ts }).expect("strings serialize");
    buf.put_slice(b"\n\n");
}

/// The one `gap` event sent when retention has trimmed past a cursor;
/// `requested` as the client sent it.
pub(crate) fn gap(requested: &str, resume_from: StreamId) -> Bytes {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Gap<'a> {
        requested: &'a str,
        resume_from: String,
        reason: &'static str,
    }
    let mut buf = BytesMut::with_capacity(128);
    buf.put_slice(b"event: gap\ndata: ");
    let gap = Gap {
        requested,
        resume_from: resume_from.to_string(),
        reason: "retention",
    };
    serde_json::to_writer((&mut buf).writer(), &gap).expect("strings serialize");
    buf.put_slice(b"\n\n");
    buf.freeze()
}

fn put_line(buf: &mut BytesMut, field: &str, value: &str) {
    buf.put_slice(field.as_bytes());
    buf.put_slice(value.as_bytes());
    buf.put_u8(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: (u64, u64), pairs: &[(&str, &str)]) -> Entry {
        Entry {
            id: StreamId::new(id.0, id.1),
            fields: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_live_entry_is_id_event_and_the_other_fields_as_strings() {
        let e = entry(
            (1747000000000, 3),
            &[
                ("type", "add"),
                ("path", "watch/x.mkv"),
                ("size", "123"),
                ("timestamp", "1747000000000"),
            ],
        );
        let mut buf = BytesMut::new();
        put_entry(&mut buf, &e);
        assert_eq!(
            std::str::from_utf8(&buf).unwrap(),
            "id: 1747000000000-3\nevent: add\n\
             data: {\"path\":\"watch/x.mkv\",\"size\":\"123\",\"timestamp\":\"1747000000000\"}\n\n"
        );
    }

    #[test]
    fn framing_is_lf_only_and_a_type_cannot_break_it() {
        for e in [
            entry((5, 0), &[("path", "a\r\nb")]),
            entry((5, 1), &[("type", "x\ndata: y"), ("k", "\r")]),
            entry((5, 2), &[("type", ""), ("k", "v")]),
        ] {
            let mut buf = BytesMut::new();
            put_entry(&mut buf, &e);
            let text = String::from_utf8(buf.to_vec()).unwrap();
            assert!(!text.contains('\r'), "{text:?}");
            let lines: Vec<&str> = text.trim_end_matches('\n').split('\n').collect();
            assert_eq!(lines.len(), 3, "{text:?}");
            assert_eq!(lines[1], "event: message");
            assert!(text.ends_with("\n\n"));
        }
    }

    #[test]
    fn a_batch_gives_what_follows_a_cursor_without_copying() {
        let mut b = BatchBuilder::default();
        for seq in 1..=3 {
            b.push(&entry(
                (7, seq),
                &[("type", "set"), ("key", &format!("k{seq}"))],
            ));
        }
        let batch = b.finish().unwrap();
        let ids = |bytes: Bytes| -> Vec<String> {
            std::str::from_utf8(&bytes)
                .unwrap()
                .lines()
                .filter_map(|l| l.strip_prefix("id: ").map(str::to_owned))
                .collect()
        };
        assert_eq!(
            ids(batch.after(StreamId::new(6, 9)).unwrap()),
            ["7-1", "7-2", "7-3"]
        );
        assert_eq!(
            ids(batch.after(StreamId::new(7, 1)).unwrap()),
            ["7-2", "7-3"]
        );
        assert_eq!(ids(batch.after(StreamId::new(7, 2)).unwrap()), ["7-3"]);
        assert!(batch.after(StreamId::new(7, 3)).is_none());
        assert_eq!(batch.count_after(StreamId::new(7, 2)), 1);
        assert_eq!(batch.count_after(StreamId::new(7, 3)), 0);
        assert!(batch.after(StreamId::new(8, 0)).is_none());
        assert!(BatchBuilder::default().finish().is_none());
    }

    #[test]
    fn snapshot_sets_carry_an_id_only_when_asked() {
        let mut buf = BytesMut::new();
        put_snapshot_set(&mut buf, "file:A/title", "17", None);
        put_snapshot_set(&mut buf, "file:A/q\"uote", "17", Some(StreamId::new(9, 1)));
        assert_eq!(
            std::str::from_utf8(&buf).unwrap(),
            "event: set\ndata: {\"key\":\"file:A/title\",\"ts\":\"17\"}\n\n\
             id: 9-1\nevent: set\ndata: {\"key\":\"file:A/q\\\"uote\",\"ts\":\"17\"}\n\n"
        );
    }

    #[test]
    fn the_gap_names_both_ids_and_the_reason() {
        let g = gap("1-0", StreamId::new(7, 2));
        assert_eq!(
            std::str::from_utf8(&g).unwrap(),
            "event: gap\ndata: {\"requested\":\"1-0\",\"resumeFrom\":\"7-2\",\"reason\":\"retention\"}\n\n"
        );
    }
}
