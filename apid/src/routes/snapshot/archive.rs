//! What a snapshot archive holds and the rules for reading and writing it:
//! the manifest, the entry names, one record's entry, and plugin output on
//! disk, never followed through a symbolic link nor written outside its
//! folder.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use metacore::error::ApiError;
use metacore::record::{Fields, MAX_FIELD_LEN};
use metacore::rid::Rid;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use super::checked::{EntryFault, copy_checked, read_checked};
use crate::nested::flatten;

/// The manifest's `schemaVersion` written and the only one read.
pub const SCHEMA_VERSION: u64 = 2;
/// Largest `metadata/<rid>.json` entry read (a file above it fails).
pub const MAX_RECORD_BYTES: u64 = 64 * 1024 * 1024;
/// Deepest `metadata/<rid>.json` read: a level per segment of the longest
/// field name (segments of a byte or more between slashes; the root
/// object holds the first, the last is a string). serde_json's own bound, 128 levels, refused the export of a
/// record with a field of 128 segments or more; this one fits a blocking
/// thread's stack several times over, even unoptimized.
pub(super) const MAX_RECORD_DEPTH: usize = MAX_FIELD_LEN.div_ceil(2);
/// Largest `manifest.json` read.
pub(super) const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
/// Where plugin output lives in the archive.
pub const PLUGIN_PREFIX: &str = "cache/plugin-output/";
/// Where the records live in the archive: `metadata/<rid>.json`.
pub(super) const METADATA_PREFIX: &str = "metadata/";

/// `manifest.json`, as an export writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u64,
    /// RFC 3339.
    pub generated_at: String,
    pub source_host: String,
    /// Records listed when the export started.
    pub file_count: usize,
    pub includes: Includes,
}

/// What the archive holds besides the manifest and index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Includes {
    pub metadata: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_output: Option<bool>,
}

/// `file:<rid>/<field>` → `(rid, field)`.
pub(super) fn split_field_key(key: &str) -> Option<(Rid, &str)> {
    let rest = key.strip_prefix("file:")?;
    let (rid, field) = rest.split_once('/')?;
    Some((Rid::parse(rid).ok()?, field))
}

/// `metamesh-snapshot-YYYYMMDD-HHMMSS.zip` from an RFC 3339 UTC time.
pub(super) fn archive_name(rfc3339: &str) -> String {
    let digits: String = rfc3339
        .chars()
        .filter(char::is_ascii_digit)
        .take(14)
        .collect();
    let (date, time) = digits.split_at(digits.len().min(8));
    format!("metamesh-snapshot-{date}-{time}.zip")
}

pub(super) fn deflated() -> SimpleFileOptions {
    SimpleFileOptions::default().compression_method(CompressionMethod::Deflated)
}

/// Adds the regular files under `root` as `cache/plugin-output/<rel>`,
/// in name order. Symbolic links are skipped (and `root` itself when it is
/// one), so nothing outside `root` is read; so are names [`confined`]
/// refuses, so that no entry names a place outside its folder.
pub(super) fn add_plugin_dir<W: Write + Seek>(
    zip: &mut ZipWriter<W>,
    root: &Path,
) -> io::Result<()> {
    match std::fs::symlink_metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            tracing::warn!(dir = %root.display(), "plugin output is not a directory; left out of the snapshot");
            return Ok(());
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(&rel))?.collect::<io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for entry in entries {
            let kind = entry.file_type()?;
            let rel = rel.join(entry.file_name());
            let Some(name) = rel.to_str() else {
                tracing::warn!(path = %rel.display(), "plugin output name is not UTF-8; left out of the snapshot");
                continue;
            };
            // Only names an import takes back: a `\` is a separator to
            // many ZIP readers (the format allows only `/`), so an entry
            // `cache/plugin-output/..\..\x` would unpack outside its
            // folder there.
            if confined(name).is_none() {
                tracing::warn!(path = %rel.display(), "plugin output name holds a backslash; left out of the snapshot");
                continue;
            }
            if kind.is_dir() {
                subdirs.push(rel.clone());
            } else if kind.is_file() {
                let Ok(mut file) = open_no_follow(&root.join(&rel)) else {
                    continue;
                };
                let len = file.metadata()?.len();
                let opts = deflated().large_file(len >= u64::from(u32::MAX));
                zip.start_file(format!("{PLUGIN_PREFIX}{name}"), opts)?;
                io::copy(&mut file, zip)?;
            }
        }
        // Depth first, in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

fn open_no_follow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Checks `manifest.json`.
pub fn check_manifest(bytes: &[u8]) -> Result<(), ApiError> {
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("manifest.json is not JSON: {e}")))?;
    // A whole number written as a float (`2.0`) is that number.
    let version = v.get("schemaVersion").and_then(|n| {
        n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1e15)
                .map(|f| f as u64)
        })
    });
    match version {
        Some(SCHEMA_VERSION) => Ok(()),
        Some(other) => Err(ApiError::bad_request(format!(
            "the snapshot's schemaVersion is {other}; this server reads {SCHEMA_VERSION}"
        ))),
        None => Err(ApiError::bad_request(
            "manifest.json has no numeric schemaVersion",
        )),
    }
}

/// `rel` as a relative path that stays under its base: plain segments
/// only (no `..`, no root, no empty name).
pub fn confined(rel: &str) -> Option<PathBuf> {
    if rel.is_empty() || rel.contains('\0') || rel.contains('\\') {
        return None;
    }
    let path = Path::new(rel);
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::Normal(seg) => out.push(seg),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// One `metadata/<rid>.json` entry, which declares `declared` bytes, as
/// flat fields; refused when its bytes are not what its header says
/// ([`copy_checked`]), when it is over [`MAX_RECORD_BYTES`], or when it is
/// not a JSON object.
pub(super) fn read_record(entry: &mut impl Read, declared: u64) -> Result<Fields, String> {
    let bytes = read_checked(entry, declared, MAX_RECORD_BYTES).map_err(|e| e.to_string())?;
    let depth = json_depth(&bytes);
    if depth > MAX_RECORD_DEPTH {
        return Err(format!(
            "nested {depth} levels deep; a record's fields nest {MAX_RECORD_DEPTH} at most"
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    // Bounded by the depth checked above.
    de.disable_recursion_limit();
    let doc = Value::deserialize(&mut de)
        .and_then(|doc| de.end().map(|()| doc))
        .map_err(|e| format!("not JSON: {e}"))?;
    if !doc.is_object() {
        return Err("not a JSON object".into());
    }
    Ok(flatten(&doc))
}

/// How deep the arrays and objects of a JSON text nest, counted without
/// recursion, strings skipped. On a text that is not JSON it counts what
/// the parser would meet before its first error, so it bounds the
/// parser's recursion either way.
fn json_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Why a plugin output entry is not written. The messages name no path of
/// ours: they go into the import's report.
#[derive(Debug, thiserror::Error)]
pub(super) enum PluginSkip {
    #[error("the path leaves the plugin output folder")]
    Outside,
    #[error("the entry is a symbolic link")]
    Link,
    #[error("a symbolic link or a folder is in the way")]
    InTheWay,
    #[error(transparent)]
    Entry(#[from] EntryFault),
    #[error("cannot write the file")]
    Write(#[source] io::Error),
}

/// Where a plugin file is written before it is checked whole: beside its
/// destination, so the rename that puts it there stays on one volume.
fn part_path(dest: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = dest.file_name().unwrap_or_default().to_string_lossy();
    dest.with_file_name(format!(".{name}.import-{}-{n}.part", std::process::id()))
}

/// Writes `base/rel` from `data`, an entry declaring `declared` bytes,
/// refusing a path that leaves `base`, or goes through or onto a symbolic
/// link. The bytes go to a part file beside the destination and replace
/// it only once the whole entry was read and checked ([`copy_checked`]),
/// so a damaged entry leaves nothing behind, not even a truncated file. On
/// a dry run the path is checked and the entry read and checked, nothing
/// written.
pub(super) fn write_plugin_file(
    base: &Path,
    rel: &str,
    data: &mut impl Read,
    declared: u64,
    dry_run: bool,
) -> Result<(), PluginSkip> {
    let rel = confined(rel).ok_or(PluginSkip::Outside)?;
    if dry_run {
        copy_checked(data, declared, &mut io::sink())?;
        return Ok(());
    }
    let mut dir = base.to_path_buf();
    let parents = rel
        .parent()
        .map(|p| p.components().collect::<Vec<_>>())
        .unwrap_or_default();
    if !real_dir(&dir, true) {
        return Err(PluginSkip::InTheWay);
    }
    for comp in parents {
        dir.push(comp);
        if !real_dir(&dir, false) {
            return Err(PluginSkip::InTheWay);
        }
    }
    let dest = base.join(&rel);
    match std::fs::symlink_metadata(&dest) {
        Ok(m) if !m.is_file() => return Err(PluginSkip::InTheWay),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(PluginSkip::Write(e)),
    }
    use std::os::unix::fs::OpenOptionsExt;
    let part = part_path(&dest);
    // Other containers read what plugins left (N17): 0644 whatever the
    // umask, as WebDAV makes them.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(metacore::files::SHARED_FILE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&part)
        .map_err(PluginSkip::Write)?;
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(
        metacore::files::SHARED_FILE,
    ))
    .map_err(PluginSkip::Write)?;
    let written = copy_checked(data, declared, &mut file)
        .map_err(PluginSkip::from)
        .and_then(|_| file.flush().map_err(PluginSkip::Write))
        .and_then(|()| std::fs::rename(&part, &dest).map_err(PluginSkip::Write));
    if written.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    written
}

/// `dir` is (or is made, 0755 whatever the umask: other containers read
/// it) a directory that is not a symbolic link.
fn real_dir(dir: &Path, all: bool) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let shared = metacore::files::SHARED_DIR;
    match std::fs::symlink_metadata(dir) {
        Ok(m) => m.is_dir(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => if all {
            metacore::files::ensure_dir_tree(dir, shared)
        } else {
            std::fs::create_dir(dir).and_then(|()| {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(shared))
            })
        }
        .is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use metacore::error::ErrorCode;

    use super::*;

    #[test]
    fn manifest_needs_schema_version_2() {
        assert!(check_manifest(br#"{"schemaVersion":2,"fileCount":0}"#).is_ok());
        for bad in [
            &br#"{"schemaVersion":3}"#[..],
            br#"{"schemaVersion":"2"}"#,
            b"{}",
            b"not json",
        ] {
            let e = check_manifest(bad).unwrap_err();
            assert_eq!(
                e.code,
                ErrorCode::BadRequest,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn plugin_paths_stay_inside() {
        assert_eq!(confined("a/b.txt"), Some(PathBuf::from("a/b.txt")));
        assert_eq!(confined("./a"), Some(PathBuf::from("a")));
        for bad in [
            "",
            "../x",
            "a/../../x",
            "a/../b",
            "/etc/passwd",
            "a\\..\\b",
            "a\0b",
            ".",
        ] {
            assert_eq!(confined(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn plugin_files_are_written_inside_and_never_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("plugin");
        write_plugin_file(&base, "x/y.txt", &mut &b"hi"[..], 2, false).unwrap();
        assert_eq!(std::fs::read(base.join("x/y.txt")).unwrap(), b"hi");
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), base.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("t"), base.join("onto")).unwrap();
        for refused in ["../escaped", "link/z.txt", "onto"] {
            assert!(
                write_plugin_file(&base, refused, &mut &b"no"[..], 2, false).is_err(),
                "{refused}"
            );
        }
        assert!(!dir.path().join("escaped").exists());
        assert!(!outside.path().join("z.txt").exists());
        assert!(!outside.path().join("t").exists());
        write_plugin_file(&base, "dry.txt", &mut &b"no"[..], 2, true).unwrap();
        assert!(!base.join("dry.txt").exists(), "a dry run writes nothing");
    }

    /// An entry that is not what it declares leaves no file, no part file,
    /// and the file it would have replaced as it was.
    #[test]
    fn a_damaged_plugin_entry_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("plugin");
        write_plugin_file(&base, "kept.txt", &mut &b"old"[..], 3, false).unwrap();
        for (name, declared) in [("kept.txt", 9), ("new.txt", 9), ("long.txt", 1)] {
            let e = write_plugin_file(&base, name, &mut &b"new"[..], declared, false).unwrap_err();
            assert!(matches!(e, PluginSkip::Entry(_)), "{name}: {e:?}");
            let e = write_plugin_file(&base, name, &mut &b"new"[..], declared, true).unwrap_err();
            assert!(matches!(e, PluginSkip::Entry(_)), "{name}, dry run: {e:?}");
        }
        assert_eq!(std::fs::read(base.join("kept.txt")).unwrap(), b"old");
        let left: Vec<_> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["kept.txt"], "no part file, no new file");
    }

    /// Found by the property tests: serde_json stopped at 128 levels, so
    /// the export of a record with a field of 128 segments or more could
    /// not be imported. A record as deep as a field name may be reads
    /// back; a deeper text is refused unparsed, without a stack overflow.
    #[test]
    fn a_record_as_deep_as_a_name_may_be_is_read_back() {
        let mut fields = Fields::new();
        fields.insert(vec!["a"; 512].join("/"), "deep".into());
        fields.insert("title".into(), "x".into());
        let text = serde_json::to_vec(&crate::nested::nest(&fields)).unwrap();
        assert_eq!(json_depth(&text), MAX_RECORD_DEPTH);
        let len = text.len() as u64;
        assert_eq!(read_record(&mut &text[..], len).unwrap(), fields);

        let deeper = format!(r#"{{"a":{}1{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
        let len = deeper.len() as u64;
        let e = read_record(&mut deeper.as_bytes(), len).unwrap_err();
        assert!(e.contains("nested 100001 levels deep"), "{e}");
        assert_eq!(json_depth(br#"{"a":"[[[{\"[","b":[{}]}"#), 3);
        let e = read_record(&mut &b"{} x"[..], 4).unwrap_err();
        assert!(e.starts_with("not JSON"), "trailing bytes: {e}");
    }

    /// A `\\` in a name is a folder separator to many ZIP readers: such
    /// a file is left out, not written as an entry that unpacks outside.
    #[test]
    fn plugin_names_an_import_refuses_are_not_exported() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("d\\e")).unwrap();
        for name in ["a.txt", "..\\..\\x.txt", "d\\e/f.txt"] {
            std::fs::write(root.join(name), b"x").unwrap();
        }
        let mut zip = ZipWriter::new(io::Cursor::new(Vec::new()));
        add_plugin_dir(&mut zip, root).unwrap();
        let mut archive = zip::ZipArchive::new(zip.finish().unwrap()).unwrap();
        let names: Vec<String> = (0..archive.len())
            .map(|i| archive.by_index(i).unwrap().name().unwrap().into_owned())
            .collect();
        assert_eq!(names, ["cache/plugin-output/a.txt"]);
    }

    #[test]
    fn archive_names_follow_the_original() {
        assert_eq!(
            archive_name("2024-03-05T07:08:09Z"),
            "metamesh-snapshot-20240305-070809.zip"
        );
    }

    #[test]
    fn field_keys_split() {
        let rid = Rid::mint();
        assert_eq!(
            split_field_key(&format!("file:{rid}/a/b")),
            Some((rid, "a/b"))
        );
        assert_eq!(split_field_key("file:events"), None);
        assert_eq!(split_field_key("cid:x"), None);
    }
}
