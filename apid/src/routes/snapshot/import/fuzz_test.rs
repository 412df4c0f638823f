//! Property tests of the snapshot reader ([`read_zip`]) on hostile
//! archives: arbitrary bytes, and valid snapshots with a few bytes
//! mutated (a flag, a size, a CRC, an offset), each read under small
//! limits. It answers a clear refusal or reads the archive, never
//! panics, never passes its entry or byte limits, writes nothing outside
//! the plugin folder (nothing at all on a dry run), and a snapshot as an
//! export writes it reads back whole. `cargo test -p apid fuzz`.

use std::collections::BTreeMap;
use std::io::{Cursor, Write};
use std::path::Path;

use metacore::api::storaged::{ImportConflict, ImportMode};
use metacore::error::ErrorCode;
use metacore::record::Fields;
use metacore::rid::Rid;
use metacore::testing::cases;
use proptest::prelude::*;
use proptest::sample::Index;
use tokio::sync::mpsc;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use super::report::{ImportOptions, PluginReport};
use super::unpack::read_zip;
use crate::nested::nest;
use crate::routes::snapshot::archive::{MAX_RECORD_DEPTH, METADATA_PREFIX, PLUGIN_PREFIX};

/// A snapshot as an export writes it.
#[derive(Debug, Clone)]
struct Snapshot {
    records: BTreeMap<Rid, Fields>,
    plugin: BTreeMap<String, Vec<u8>>,
    deflated: bool,
}

fn fields() -> impl Strategy<Value = Fields> {
    // Names `0..2` at the root too: a record of only those is still an
    // object.
    prop::collection::btree_map(
        "([a-z]{1,5}|[0-2])(/[a-z0-9]{1,3}){0,2}",
        any::<String>(),
        0..5,
    )
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    (
        prop::collection::btree_map(any::<u128>().prop_map(Rid::from_u128), fields(), 0..4),
        prop::collection::btree_map(
            "[a-z]{1,6}(/[a-z]{1,6}\\.txt)?",
            prop::collection::vec(any::<u8>(), 0..300),
            0..3,
        ),
        any::<bool>(),
    )
        .prop_map(|(records, plugin, deflated)| Snapshot {
            // One plugin file never stands where another needs a folder.
            plugin: plugin
                .into_iter()
                .map(|(k, v)| (format!("{k}.bin"), v))
                .collect(),
            records,
            deflated,
        })
}

impl Snapshot {
    /// Its entries: the manifest, each record, each plugin file.
    fn entries(&self) -> Vec<(String, Vec<u8>)> {
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "generatedAt": "2026-01-01T00:00:00Z",
            "sourceHost": "h",
            "fileCount": self.records.len(),
            "includes": {"metadata": true, "pluginOutput": !self.plugin.is_empty()},
        });
        let mut out = vec![(
            "manifest.json".to_owned(),
            manifest.to_string().into_bytes(),
        )];
        for (rid, f) in &self.records {
            let doc = serde_json::to_vec_pretty(&nest(f)).expect("a document serializes");
            out.push((format!("{METADATA_PREFIX}{rid}.json"), doc));
        }
        for (rel, bytes) in &self.plugin {
            out.push((format!("{PLUGIN_PREFIX}{rel}"), bytes.clone()));
        }
        out
    }

    fn zip(&self) -> Vec<u8> {
        let method = if self.deflated {
            CompressionMethod::Deflated
        } else {
            CompressionMethod::Stored
        };
        let opts = SimpleFileOptions::default().compression_method(method);
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        for (name, bytes) in self.entries() {
            zip.start_file(name, opts).expect("an entry starts");
            zip.write_all(&bytes).expect("and is written");
        }
        zip.finish().expect("the archive ends").into_inner()
    }
}

/// A few bytes of an archive changed.
#[derive(Debug, Clone)]
enum Damage {
    Flip(Index, u8),
    /// A little-endian `u32` written over (a size, a CRC, an offset).
    Word(Index, u32),
    Cut(Index),
    Drop(Index),
}

fn damage() -> impl Strategy<Value = Damage> {
    let word = prop_oneof![any::<u32>(), Just(0), Just(u32::MAX), 0..4096u32];
    prop_oneof![
        (any::<Index>(), 1..=255u8).prop_map(|(at, m)| Damage::Flip(at, m)),
        (any::<Index>(), word).prop_map(|(at, w)| Damage::Word(at, w)),
        any::<Index>().prop_map(Damage::Cut),
        any::<Index>().prop_map(Damage::Drop),
    ]
}

fn damaged(mut bytes: Vec<u8>, all: &[Damage]) -> Vec<u8> {
    for d in all {
        if bytes.is_empty() {
            break;
        }
        match d {
            Damage::Flip(at, m) => {
                let i = at.index(bytes.len());
                bytes[i] ^= m;
            }
            Damage::Word(at, w) => {
                let i = at.index(bytes.len());
                let end = (i + 4).min(bytes.len());
                bytes[i..end].copy_from_slice(&w.to_le_bytes()[..end - i]);
            }
            Damage::Cut(at) => bytes.truncate(at.index(bytes.len())),
            Damage::Drop(at) => {
                bytes.remove(at.index(bytes.len()));
            }
        }
    }
    bytes
}

/// The limits an import runs under.
#[derive(Debug, Clone)]
struct Limits {
    max_entries: u64,
    max_bytes: u64,
    dry_run: bool,
}

fn limits() -> impl Strategy<Value = Limits> {
    (
        prop_oneof![Just(64u64), 0..8u64],
        prop_oneof![Just(1u64 << 20), 0..3000u64],
        any::<bool>(),
    )
        .prop_map(|(max_entries, max_bytes, dry_run)| Limits {
            max_entries,
            max_bytes,
            dry_run,
        })
}

/// What one read of an archive gave.
struct Read {
    answer: Result<Option<PluginReport>, metacore::error::ApiError>,
    records: Vec<Result<(Rid, Fields), String>>,
    /// The files left under the plugin folder, by relative path.
    written: BTreeMap<String, Vec<u8>>,
}

fn files_under(root: &Path, at: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(dir) = std::fs::read_dir(at) else {
        return;
    };
    for e in dir {
        let path = e.expect("a folder entry").path();
        if path.is_dir() {
            files_under(root, &path, out);
        } else {
            let rel = path.strip_prefix(root).expect("under the root");
            let bytes = std::fs::read(&path).expect("a written file reads");
            out.insert(rel.display().to_string(), bytes);
        }
    }
}

/// Reads `archive` as an import does, and checks what holds whatever
/// the archive: a clear answer, the limits kept, nothing written outside
/// the plugin folder, nothing at all on a dry run.
fn read(archive: &[u8], limits: &Limits) -> Result<Read, TestCaseError> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("snapshot.zip");
    std::fs::write(&file, archive).expect("the archive is written");
    let opts = ImportOptions {
        mode: ImportMode::Merge,
        conflict: ImportConflict::Source,
        dry_run: limits.dry_run,
        plugin_dir: dir.path().join("plugin"),
        max_entries: limits.max_entries,
        max_bytes: limits.max_bytes,
    };
    // Room for every item, so the reader never waits on the channel.
    let (tx, mut rx) = mpsc::channel(4096);
    let answer = read_zip(std::fs::File::open(&file).expect("opens"), &tx, &opts);
    drop(tx);
    let mut records = Vec::new();
    while let Some(item) = rx.blocking_recv() {
        records.push(item.parsed);
    }
    let mut written = BTreeMap::new();
    files_under(&opts.plugin_dir, &opts.plugin_dir, &mut written);
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("the temp dir lists")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    left.sort();
    prop_assert!(
        left == ["snapshot.zip"] || left == ["plugin", "snapshot.zip"],
        "{:?}",
        left
    );
    match &answer {
        Ok(plugin) => {
            prop_assert!(records.len() as u64 <= limits.max_entries);
            let bytes: usize = written.values().map(Vec::len).sum();
            prop_assert!(bytes as u64 <= limits.max_bytes, "{} bytes written", bytes);
            if limits.dry_run {
                prop_assert!(written.is_empty(), "a dry run wrote {:?}", written.keys());
            } else {
                let reported = plugin.as_ref().map_or(0, |p| p.written);
                prop_assert_eq!(reported, written.len() as u64);
            }
        }
        Err(e) => prop_assert!(
            matches!(
                e.code,
                ErrorCode::BadRequest | ErrorCode::PayloadTooLarge | ErrorCode::InsufficientStorage
            ),
            "{:?}",
            e
        ),
    }
    Ok(Read {
        answer,
        records,
        written,
    })
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn any_bytes_are_a_snapshot_or_a_clear_refusal(
        bytes in prop::collection::vec(any::<u8>(), 0..4096),
        limits in limits(),
    ) {
        read(&bytes, &limits)?;
    }

    #[test]
    fn a_damaged_snapshot_is_read_within_its_limits_or_clearly_refused(
        s in snapshot(),
        damage in prop::collection::vec(damage(), 1..4),
        limits in limits(),
    ) {
        read(&damaged(s.zip(), &damage), &limits)?;
    }

    #[test]
    fn a_snapshot_is_read_back_whole_exactly_when_it_is_within_its_limits(
        s in snapshot(),
        limits in limits(),
    ) {
        let entries = s.entries();
        let expanded: u64 = entries.iter().map(|(_, b)| b.len() as u64).sum();
        let within = entries.len() as u64 <= limits.max_entries && expanded <= limits.max_bytes;
        let got = read(&s.zip(), &limits)?;
        match got.answer {
            Err(e) => {
                prop_assert!(!within, "refused within its limits: {:?}", e);
                prop_assert_eq!(e.code, ErrorCode::PayloadTooLarge);
                prop_assert!(got.records.is_empty() && got.written.is_empty());
            }
            Ok(_) => {
                prop_assert!(within, "read past its limits");
                let records: BTreeMap<Rid, Fields> = got
                    .records
                    .into_iter()
                    .collect::<Result<_, _>>()
                    .map_err(TestCaseError::fail)?;
                prop_assert_eq!(records, s.records);
                if !limits.dry_run {
                    prop_assert_eq!(got.written, s.plugin);
                }
            }
        }
    }

    #[test]
    fn a_record_as_deep_as_a_name_may_be_is_read_back_whole(
        depth in 1..=MAX_RECORD_DEPTH,
        f in fields(),
    ) {
        let mut records = BTreeMap::new();
        let mut f = f;
        f.insert(vec!["a"; depth].join("/"), "deep".into());
        records.insert(Rid::from_u128(1), f);
        let s = Snapshot { records, plugin: BTreeMap::new(), deflated: true };
        let limits = Limits { max_entries: 64, max_bytes: 1 << 20, dry_run: true };
        let got = read(&s.zip(), &limits)?;
        prop_assert!(got.answer.is_ok());
        let records: BTreeMap<Rid, Fields> = got
            .records
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(TestCaseError::fail)?;
        prop_assert_eq!(records, s.records);
    }
}
