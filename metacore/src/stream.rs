//! Event streams: their names, the `<ms>-<seq>` entry IDs (the Redis Stream
//! form, kept so cursors persisted by clients still compare) and entries.
//!
//! On disk an entry is the row `ev:<stream>/<ms13>-<seq10>` whose value is
//! the JSON object of the entry's fields (all strings); the zero padding
//! makes key order ID order.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The streams kept in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamName {
    /// `{type: set|del, key, ts}` for every change of a `file:` key,
    /// appended by storaged in the transaction of the change.
    Meta,
    /// add/change/delete/rename/reset of files, appended by watcherd.
    Files,
}

impl StreamName {
    pub const ALL: [StreamName; 2] = [StreamName::Meta, StreamName::Files];

    pub fn as_str(self) -> &'static str {
        match self {
            StreamName::Meta => "meta:events",
            StreamName::Files => "file:events",
        }
    }

    /// The first key of the stream's rows: `ev:<stream>/`.
    pub fn key_prefix(self) -> &'static str {
        match self {
            StreamName::Meta => "ev:meta:events/",
            StreamName::Files => "ev:file:events/",
        }
    }

    /// The key just past the stream's rows: `ev:<stream>0`.
    pub fn key_end(self) -> &'static str {
        match self {
            StreamName::Meta => "ev:meta:events0",
            StreamName::Files => "ev:file:events0",
        }
    }

    /// The high-water-mark key: `evhwm:<stream>`.
    pub fn hwm_key(self) -> &'static str {
        match self {
            StreamName::Meta => "evhwm:meta:events",
            StreamName::Files => "evhwm:file:events",
        }
    }

    /// The row key of one entry.
    pub fn entry_key(self, id: StreamId) -> String {
        format!("{}{}", self.key_prefix(), id.key_suffix())
    }
}

impl fmt::Display for StreamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown stream name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown stream {0:?} (known: meta:events, file:events)")]
pub struct UnknownStream(pub String);

impl FromStr for StreamName {
    type Err = UnknownStream;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "meta:events" => Ok(StreamName::Meta),
            "file:events" => Ok(StreamName::Files),
            other => Err(UnknownStream(other.to_owned())),
        }
    }
}

/// An entry ID: milliseconds and a sequence within the millisecond.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// Why a string is not a stream ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a stream ID is <ms>-<seq> or <ms> in decimal, got {0:?}")]
pub struct BadStreamId(pub String);

/// Largest millisecond value that fits the 13-digit key form.
const MAX_MS: u64 = 9_999_999_999_999;
/// Largest sequence that fits the 10-digit key form.
const MAX_SEQ: u64 = 9_999_999_999;

impl StreamId {
    pub const ZERO: StreamId = StreamId { ms: 0, seq: 0 };

    pub fn new(ms: u64, seq: u64) -> Self {
        Self { ms, seq }
    }

    /// The ID after `self` for a clock reading of `now_ms`: a later
    /// millisecond starts at sequence 0, otherwise (same millisecond, or the
    /// clock stepped back) the sequence grows. IDs never go backwards.
    pub fn next_after(self, now_ms: u64) -> Self {
        if now_ms > self.ms {
            Self { ms: now_ms, seq: 0 }
        } else if self.seq < MAX_SEQ {
            Self {
                ms: self.ms,
                seq: self.seq + 1,
            }
        } else {
            Self {
                ms: self.ms + 1,
                seq: 0,
            }
        }
    }

    /// `<ms13>-<seq10>`, the zero-padded form used in row keys.
    pub fn key_suffix(self) -> String {
        format!("{:013}-{:010}", self.ms, self.seq)
    }

    /// Parses `<ms>-<seq>`, `<ms>` (sequence 0) or the padded key form.
    pub fn parse(s: &str) -> Result<Self, BadStreamId> {
        let bad = || BadStreamId(s.to_owned());
        let digits = |t: &str| -> Result<u64, BadStreamId> {
            if t.is_empty() || t.len() > 20 || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse().map_err(|_| bad())
        };
        let (ms, seq) = match s.split_once('-') {
            Some((ms, seq)) => (digits(ms)?, digits(seq)?),
            None => (digits(s)?, 0),
        };
        if ms > MAX_MS || seq > MAX_SEQ {
            return Err(bad());
        }
        Ok(Self { ms, seq })
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

impl fmt::Debug for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StreamId({self})")
    }
}

impl FromStr for StreamId {
    type Err = BadStreamId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

crate::serde_as_text!(StreamId);

/// The fields of an entry; every value is a string.
pub type EntryFields = BTreeMap<String, String>;

/// One stream entry as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub id: StreamId,
    pub fields: EntryFields,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_order_numerically_and_by_key() {
        let a = StreamId::new(999, 5);
        let b = StreamId::new(1000, 0);
        assert!(a < b);
        assert!(a.key_suffix() < b.key_suffix());
        assert_eq!(b.key_suffix(), "0000000001000-0000000000");
    }

    #[test]
    fn parse_forms() {
        assert_eq!(StreamId::parse("0").unwrap(), StreamId::ZERO);
        assert_eq!(StreamId::parse("0-0").unwrap(), StreamId::ZERO);
        assert_eq!(
            StreamId::parse("1747000000000-12").unwrap(),
            StreamId::new(1747000000000, 12)
        );
        assert_eq!(
            StreamId::parse("1747000000000-0000000012").unwrap(),
            StreamId::new(1747000000000, 12)
        );
        for bad in [
            "",
            "-",
            "1-",
            "-1",
            "a-1",
            "1-2-3",
            "+1",
            "1 ",
            "99999999999999-0",
        ] {
            assert!(StreamId::parse(bad).is_err(), "{bad:?}");
        }
        let id = StreamId::new(1, 2);
        assert_eq!(StreamId::parse(&id.to_string()).unwrap(), id);
    }

    #[test]
    fn next_after_never_goes_back() {
        let last = StreamId::new(5000, 3);
        assert_eq!(last.next_after(6000), StreamId::new(6000, 0));
        assert_eq!(last.next_after(5000), StreamId::new(5000, 4));
        assert_eq!(
            last.next_after(10),
            StreamId::new(5000, 4),
            "clock stepped back"
        );
        let mut id = StreamId::ZERO;
        for now in [5, 5, 4, 3, 9, 9, 1] {
            let next = id.next_after(now);
            assert!(next > id);
            id = next;
        }
    }

    #[test]
    fn stream_names() {
        for s in StreamName::ALL {
            assert_eq!(s.as_str().parse::<StreamName>().unwrap(), s);
            assert!(s.key_prefix() < s.key_end());
            assert!(s.entry_key(StreamId::new(1, 1)).starts_with(s.key_prefix()));
        }
        assert!("other".parse::<StreamName>().is_err());
    }
}
