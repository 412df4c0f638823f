//! midhash256: the content ID the watcher gives a file, and the address
//! other services write its record by (CONTRACT decision 7).
//!
//! SHA-256 over the file's size as 8 big-endian bytes, then a sample: the
//! whole file when it is at most 1 MiB, else the 1 MiB that starts at
//! `(size - 1 MiB) / 2`. The size is the one the caller observed (the
//! walk's or the event's `stat`), so a file that grows or shrinks while it
//! is read still hashes as that size: a short read hashes what it got, as
//! the original did, and the debounce is what keeps a file being written
//! from being hashed at all.
//!
//! The sample is read with positioned reads into a 64 KiB buffer and fed
//! to the hasher as it comes: flat memory whatever the file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use metacore::cid::Cid;
use sha2::{Digest, Sha256};

/// The sample's length for files larger than it.
pub const SAMPLE: u64 = 1 << 20;

/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;

/// Where the sample of a file of `size` bytes starts, and how long it is.
pub fn sample_range(size: u64) -> (u64, u64) {
    if size <= SAMPLE {
        (0, size)
    } else {
        ((size - SAMPLE) / 2, SAMPLE)
    }
}

/// The midhash256 CID of `file`, whose size the caller observed as `size`.
pub fn of_file(file: &File, size: u64) -> io::Result<Cid> {
    Ok(Cid::midhash256(&digest_of_file(file, size)?))
}

/// The SHA-256 digest behind [`of_file`]'s CID: 32 bytes to keep per
/// known file instead of the CID's 62 characters.
pub fn digest_of_file(file: &File, size: u64) -> io::Result<[u8; 32]> {
    let (start, len) = sample_range(size);
    let mut hasher = Sha256::new();
    hasher.update(size.to_be_bytes());
    let mut buf = vec![0u8; CHUNK.min(len as usize).max(1)];
    let mut at = start;
    let end = start + len;
    while at < end {
        let want = ((end - at) as usize).min(buf.len());
        match file.read_at(&mut buf[..want], at) {
            // The file shrank since its size was taken: hash what was there.
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hasher.finalize().into())
}

/// The midhash256 CID of bytes held in memory (tests, tools).
pub fn of_bytes(bytes: &[u8]) -> Cid {
    let size = bytes.len() as u64;
    let (start, len) = sample_range(size);
    let mut hasher = Sha256::new();
    hasher.update(size.to_be_bytes());
    hasher.update(&bytes[start as usize..(start + len) as usize]);
    Cid::midhash256(&hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A deterministic pattern, the same as the one the vectors below were
    /// computed on with Python's hashlib, independently of this code:
    /// `bytes((i*31+7) % 251 for i in range(n))`, midhash as in CONTRACT 7.
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| ((i * 31 + 7) % 251) as u8).collect()
    }

    fn file_of(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    #[test]
    fn the_contract_vectors() {
        for (bytes, cid) in [
            (
                &b"hello world"[..],
                "bagacbabaec7v3fu2ygzh3e2sybg3fbzmisry2hbtpmck6vx3yftea6vzq35r4",
            ),
            (
                &b""[..],
                "bagacbabaecxvk4hvugaqw6xxrsxuxrykmyhq35i6ik5pshkn4wzdfdpa5a67y",
            ),
        ] {
            assert_eq!(of_bytes(bytes).as_str(), cid);
            let f = file_of(bytes);
            assert_eq!(of_file(&f, bytes.len() as u64).unwrap().as_str(), cid);
        }
    }

    #[test]
    fn files_around_and_past_the_sample_size() {
        for (n, cid) in [
            (
                1 << 20,
                "bagacbabaebhercrmztuhuvwf65lkfs5wjog4tmx5n7so4ynlegsuqjkarvszs",
            ),
            (
                (1 << 20) + 1,
                "bagacbabaea3sr5dmip7oqpu4qtnpnvono5bh2dce76y2aivbq2qhwf4xsu4vw",
            ),
            (
                3 * (1 << 20) + 5,
                "bagacbabaebd3x3zxvccofa4tmwg6we2kpexfhrwyxcrc7k2igrnmxgy4snbjw",
            ),
        ] {
            let bytes = pattern(n);
            assert_eq!(of_bytes(&bytes).as_str(), cid, "{n} bytes in memory");
            let f = file_of(&bytes);
            assert_eq!(
                of_file(&f, n as u64).unwrap().as_str(),
                cid,
                "{n} bytes on disk"
            );
        }
    }

    #[test]
    fn the_sample_is_the_middle_mebibyte() {
        assert_eq!(sample_range(0), (0, 0));
        assert_eq!(sample_range(SAMPLE), (0, SAMPLE));
        assert_eq!(sample_range(SAMPLE + 1), (0, SAMPLE));
        assert_eq!(sample_range(SAMPLE + 3), (1, SAMPLE));
        let two_gib = 2u64 << 30;
        assert_eq!(sample_range(two_gib), ((two_gib - SAMPLE) / 2, SAMPLE));
    }

    #[test]
    fn a_file_that_shrank_hashes_what_was_there_under_the_size_seen() {
        // Seen as 11 bytes, 5 left when read: the size in the digest is 11.
        let f = file_of(b"hello");
        let short = of_file(&f, 11).unwrap();
        let mut hasher = Sha256::new();
        hasher.update(11u64.to_be_bytes());
        hasher.update(b"hello");
        assert_eq!(short, Cid::midhash256(&hasher.finalize().into()));
        assert_ne!(short, of_bytes(b"hello"));
    }

    #[test]
    fn a_sparse_two_gib_file_hashes_its_middle() {
        let f = tempfile::tempfile().unwrap();
        let size = 2u64 << 30;
        f.set_len(size).unwrap();
        let mid = (size - SAMPLE) / 2;
        f.write_all_at(b"marker", mid).unwrap();
        let mut hasher = Sha256::new();
        hasher.update(size.to_be_bytes());
        let mut sample = vec![0u8; SAMPLE as usize];
        sample[..6].copy_from_slice(b"marker");
        hasher.update(&sample);
        assert_eq!(
            of_file(&f, size).unwrap(),
            Cid::midhash256(&hasher.finalize().into())
        );
    }
}
