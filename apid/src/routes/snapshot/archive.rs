//! What a snapshot archive holds and the rules for reading and writing it:
//! the manifest, the entry names, one record's entry, and plugin output on
//! disk, never followed through a symbolic link nor written outside its
//! folder.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::{Component, Path, PathBuf};

use metacore::error::ApiError;
use metacore::record::Fields;
use metacore::rid::Rid;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use crate::nested::flatten;

/// The manifest's `schemaVersion` written and the only one read.
pub const SCHEMA_VERSION: u64 = 2;
/// Largest `metadata/<rid>.json` entry read (a file above it fails).
pub const MAX_RECORD_BYTES: u64 = 64 * 1024 * 1024;
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
/// one), so nothing outside `root` is read.
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

pub(super) fn read_record(entry: &mut impl Read) -> Result<Fields, String> {
    let mut bytes = Vec::new();
    entry
        .take(MAX_RECORD_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the entry: {e}"))?;
    if bytes.len() as u64 > MAX_RECORD_BYTES {
        return Err(format!("the entry is larger than {MAX_RECORD_BYTES} bytes"));
    }
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))?;
    if !doc.is_object() {
        return Err("not a JSON object".into());
    }
    Ok(flatten(&doc))
}

/// Writes `base/rel`, refusing a path that leaves `base`, or goes through
/// or onto a symbolic link. On a dry run only the path is checked.
pub(super) fn write_plugin_file(
    base: &Path,
    rel: &str,
    data: &mut impl Read,
    dry_run: bool,
) -> bool {
    let Some(rel) = confined(rel) else {
        return false;
    };
    if dry_run {
        return true;
    }
    let mut dir = base.to_path_buf();
    let parents = rel
        .parent()
        .map(|p| p.components().collect::<Vec<_>>())
        .unwrap_or_default();
    if !real_dir(&dir, true) {
        return false;
    }
    for comp in parents {
        dir.push(comp);
        if !real_dir(&dir, false) {
            return false;
        }
    }
    use std::os::unix::fs::OpenOptionsExt;
    let dest = base.join(&rel);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&dest);
    match file {
        Ok(mut f) => io::copy(data, &mut f).is_ok(),
        Err(_) => false,
    }
}

/// `dir` is (or is made) a directory that is not a symbolic link.
fn real_dir(dir: &Path, all: bool) -> bool {
    match std::fs::symlink_metadata(dir) {
        Ok(m) => m.is_dir(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => if all {
            std::fs::create_dir_all(dir)
        } else {
            std::fs::create_dir(dir)
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
        assert!(write_plugin_file(&base, "x/y.txt", &mut &b"hi"[..], false));
        assert_eq!(std::fs::read(base.join("x/y.txt")).unwrap(), b"hi");
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), base.join("link")).unwrap();
        for refused in ["../escaped", "link/z.txt"] {
            assert!(
                !write_plugin_file(&base, refused, &mut &b"no"[..], false),
                "{refused}"
            );
        }
        assert!(!dir.path().join("escaped").exists());
        assert!(!outside.path().join("z.txt").exists());
        assert!(write_plugin_file(&base, "dry.txt", &mut &b"no"[..], true));
        assert!(!base.join("dry.txt").exists(), "a dry run writes nothing");
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
