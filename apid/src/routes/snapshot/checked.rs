//! An archive entry taken only when it is what its header says: read to
//! its end, never past the size it declares, exactly that many bytes, and
//! its CRC-32 matched.
//!
//! The `zip` crate (9.x) compares an entry's CRC-32 only when a read
//! reaches the end of the entry's data (a `read` answering 0 into a
//! non-empty buffer, or `read_to_end`); a reader that stops at the
//! declared size (`take(size)`) never gets there, and the check never
//! runs. It fails a read that goes past the declared size, but not an
//! entry that ends before it (stored data with its CRC right and its size
//! overstated reads back short and "valid"). So [`copy_checked`] reads
//! every entry to that end itself and counts the bytes; the unit tests
//! below hold the crate to the part it does.

use std::io::{self, Read, Write};

/// Why an entry's bytes are not taken. The messages name no path of ours:
/// they go into the import's report.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EntryFault {
    /// Its data could not be read back (its CRC-32 does not match, it
    /// holds more bytes than it declares, or its compressed data is
    /// damaged): the `zip` crate's reason.
    #[error("the entry is damaged (its data is not what its header declares): {0}")]
    Damaged(#[source] io::Error),
    /// Its data ends before the size its header declares.
    #[error("the entry declares {declared} bytes but holds {held}")]
    Short { declared: u64, held: u64 },
    /// Its data goes on past the size its header declares (the crate says
    /// so first; this is the check of our own count).
    #[error("the entry holds more than the {declared} bytes it declares")]
    Long { declared: u64 },
    /// It declares more than the caller takes.
    #[error("the entry is {declared} bytes; at most {limit} are read")]
    TooLarge { declared: u64, limit: u64 },
    /// Where its bytes go failed (the disk, for plugin output).
    #[error("cannot write the entry out")]
    Write(#[source] io::Error),
}

/// Copies `entry`, which declares `declared` bytes, to `out`, reading it
/// to its end so the CRC-32 is compared; `Ok` only when the entry held
/// exactly `declared` bytes and its checksum matched. On an error `out`
/// may have taken part of the entry: the caller throws it away.
pub(crate) fn copy_checked(
    entry: &mut impl Read,
    declared: u64,
    out: &mut impl Write,
) -> Result<u64, EntryFault> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut held = 0u64;
    loop {
        let n = match entry.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(EntryFault::Damaged(e)),
        };
        held += n as u64;
        if held > declared {
            return Err(EntryFault::Long { declared });
        }
        out.write_all(&buf[..n]).map_err(EntryFault::Write)?;
    }
    if held < declared {
        return Err(EntryFault::Short { declared, held });
    }
    Ok(held)
}

/// The whole of `entry` in memory, checked as [`copy_checked`] does; an
/// entry declaring more than `limit` bytes is refused unread.
pub(crate) fn read_checked(
    entry: &mut impl Read,
    declared: u64,
    limit: u64,
) -> Result<Vec<u8>, EntryFault> {
    if declared > limit {
        return Err(EntryFault::TooLarge { declared, limit });
    }
    let mut bytes = Vec::new();
    copy_checked(entry, declared, &mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
#[path = "checked_test.rs"]
mod tests;
