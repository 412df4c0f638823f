//! [`copy_checked`] against archives whose headers lie, and the `zip`
//! crate's own checks pinned (what it catches, and what it does not when
//! a reader stops at the declared size).

use std::io::{Cursor, Read, Write};

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use super::*;

/// A ZIP of `(name, bytes)` entries, all with `method`.
fn zip_of(method: CompressionMethod, entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(method);
    for (name, bytes) in entries {
        zip.start_file(*name, opts).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// What [`patch`] rewrites in an entry's headers.
#[derive(Clone, Copy)]
enum Field {
    Crc,
    /// The declared (uncompressed) size.
    Size,
}

/// Rewrites `field` of the entry `name` to `value`, in its local header
/// and in the central directory alike (so the archive agrees with itself).
fn patch(zip: &mut [u8], name: &str, field: Field, value: u32) {
    // (signature, offset of the name length, offset of the name, of the CRC)
    const LOCAL: ([u8; 4], usize, usize, usize) = ([0x50, 0x4b, 0x03, 0x04], 26, 30, 14);
    const CENTRAL: ([u8; 4], usize, usize, usize) = ([0x50, 0x4b, 0x01, 0x02], 28, 46, 16);
    let mut patched = 0;
    for (sig, len_at, name_at, crc_at) in [LOCAL, CENTRAL] {
        for at in 0..zip.len().saturating_sub(name_at) {
            if zip[at..at + 4] != sig {
                continue;
            }
            let len = u16::from_le_bytes([zip[at + len_at], zip[at + len_at + 1]]) as usize;
            if zip.get(at + name_at..at + name_at + len) != Some(name.as_bytes()) {
                continue;
            }
            // CRC, compressed size, uncompressed size follow each other.
            let off = at
                + crc_at
                + match field {
                    Field::Crc => 0,
                    Field::Size => 8,
                };
            zip[off..off + 4].copy_from_slice(&value.to_le_bytes());
            patched += 1;
        }
    }
    assert_eq!(patched, 2, "{name}: a local header and a central entry");
}

const DATA: &[u8] = br#"{"title":"a record whose bytes are checked","year":"1999"}"#;

fn archive(method: CompressionMethod, lie: Option<(Field, u32)>) -> ZipArchive<Cursor<Vec<u8>>> {
    let mut zip = zip_of(method, &[("e", DATA)]);
    if let Some((field, value)) = lie {
        patch(&mut zip, "e", field, value);
    }
    ZipArchive::new(Cursor::new(zip)).unwrap()
}

fn copy(method: CompressionMethod, lie: Option<(Field, u32)>) -> Result<Vec<u8>, EntryFault> {
    let mut zip = archive(method, lie);
    let mut entry = zip.by_index(0).unwrap();
    let declared = entry.size();
    let mut out = Vec::new();
    copy_checked(&mut entry, declared, &mut out).map(|_| out)
}

const METHODS: [CompressionMethod; 2] = [CompressionMethod::Stored, CompressionMethod::Deflated];

fn crc_of(method: CompressionMethod) -> u32 {
    archive(method, None).by_index(0).unwrap().crc32()
}

#[test]
fn an_entry_true_to_its_header_is_copied_whole() {
    for m in METHODS {
        assert_eq!(copy(m, None).unwrap(), DATA, "{m:?}");
    }
}

#[test]
fn an_entry_whose_crc_does_not_match_is_refused() {
    for m in METHODS {
        let wrong = crc_of(m) ^ 0x0101_0101;
        let e = copy(m, Some((Field::Crc, wrong))).unwrap_err();
        assert!(matches!(e, EntryFault::Damaged(_)), "{m:?}: {e:?}");
    }
}

#[test]
fn an_entry_declaring_fewer_bytes_than_it_holds_is_refused() {
    for m in METHODS {
        let e = copy(m, Some((Field::Size, DATA.len() as u32 - 5))).unwrap_err();
        assert!(
            matches!(e, EntryFault::Damaged(_) | EntryFault::Long { .. }),
            "{m:?}: {e:?}"
        );
    }
}

#[test]
fn an_entry_declaring_more_bytes_than_it_holds_is_refused() {
    for m in METHODS {
        let declared = DATA.len() as u64 + 5;
        let e = copy(m, Some((Field::Size, declared as u32))).unwrap_err();
        assert!(
            matches!(e, EntryFault::Short { declared: d, held } if d == declared && held == DATA.len() as u64),
            "{m:?}: {e:?}"
        );
    }
}

/// Why the import reads every entry to its end: stopping at the declared
/// size, as it did, never reaches the crate's CRC comparison; and stored
/// data that is short of its declared size reads back without an error.
#[test]
fn the_crate_alone_lets_a_bad_entry_through_a_reader_that_stops_at_its_size() {
    let mut zip = archive(
        CompressionMethod::Stored,
        Some((Field::Crc, crc_of(CompressionMethod::Stored) ^ 1)),
    );
    let mut entry = zip.by_index(0).unwrap();
    let size = entry.size();
    let mut out = Vec::new();
    (&mut entry).take(size).read_to_end(&mut out).unwrap();
    assert_eq!(out, DATA, "read without a CRC error");

    let mut zip = archive(
        CompressionMethod::Stored,
        Some((Field::Size, DATA.len() as u32 + 5)),
    );
    let mut out = Vec::new();
    zip.by_index(0).unwrap().read_to_end(&mut out).unwrap();
    assert_eq!(out, DATA, "short of its declared size, without an error");
}

#[test]
fn an_entry_over_the_limit_is_refused_unread() {
    let mut zip = archive(CompressionMethod::Deflated, None);
    let mut entry = zip.by_index(0).unwrap();
    let e = read_checked(&mut entry, DATA.len() as u64, 10).unwrap_err();
    assert!(matches!(e, EntryFault::TooLarge { limit: 10, .. }), "{e:?}");
    let mut zip = archive(CompressionMethod::Deflated, None);
    let mut entry = zip.by_index(0).unwrap();
    let declared = entry.size();
    assert_eq!(read_checked(&mut entry, declared, 1 << 20).unwrap(), DATA);
}
