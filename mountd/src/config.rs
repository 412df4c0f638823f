//! `$META_CORE_PATH/mounts/mounts.json`: the mounts, in the original's
//! format (`{version, mounts: [MountConfig]}`, camelCase members; a
//! [`MountConfig`] is the mounts API's shape too, so it lives in
//! `metacore`).
//!
//! The file is written whole (temp file and rename, mode 0600: it holds
//! SMB passwords, obscured as rclone obscures them, which is not
//! encryption). A file that cannot be read as this format is set aside as
//! `mounts.json.unreadable-<ms>`, reported, and mountd starts with no
//! mounts: it is never overwritten in place. Mount paths are
//! `FILES_PATH/corn/<name>` (CONTRACT decision 11), the name sanitized.

use std::path::{Path, PathBuf};

use metacore::api::mountd::MountConfig;
use metacore::files::{StateFile, read_state};
use serde::{Deserialize, Serialize};

/// The version this build reads and writes.
const VERSION: u32 = 1;

/// The folder under `FILES_PATH` that mounts go in.
pub const MOUNTS_DIR: &str = "corn";

#[derive(Debug, Serialize, Deserialize)]
struct MountsFile {
    version: u32,
    mounts: Vec<MountConfig>,
}

/// The mounts file and what it holds.
#[derive(Debug)]
pub struct Mounts {
    file: PathBuf,
    pub mounts: Vec<MountConfig>,
}

/// Why the file could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot read or set aside {path}")]
pub struct OpenError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl Mounts {
    /// Reads `file`; an unreadable one is set aside and reported with why
    /// (the second member).
    pub fn open(file: &Path, now_ms: u64) -> Result<(Self, Option<(PathBuf, String)>), OpenError> {
        let err = |source| OpenError {
            path: file.to_owned(),
            source,
        };
        let read = read_state::<MountsFile>(file, now_ms, |f| {
            (f.version == VERSION)
                .then_some(())
                .ok_or_else(|| format!("version {} (this meta-core reads {VERSION})", f.version))
        })
        .map_err(err)?;
        let (mounts, aside) = match read {
            StateFile::Read(f) => (f.mounts, None),
            StateFile::Missing => (Vec::new(), None),
            StateFile::SetAside { kept, why } => (Vec::new(), Some((kept, why))),
        };
        Ok((
            Self {
                file: file.to_owned(),
                mounts,
            },
            aside,
        ))
    }

    /// Writes the file whole (temp file and rename, 0600), its folder
    /// made (0700) if missing.
    pub fn save(&self) -> std::io::Result<()> {
        if let Some(dir) = self.file.parent() {
            metacore::files::ensure_dir(dir, 0o700)?;
        }
        let body = MountsFile {
            version: VERSION,
            mounts: self.mounts.clone(),
        };
        let mut json = serde_json::to_vec_pretty(&body).map_err(std::io::Error::other)?;
        json.push(b'\n');
        metacore::files::write_atomic(&self.file, &json, 0o600)
    }
}

/// A mount name as a folder name: letters, digits, `-`, `_` and `.` kept,
/// every other run of characters one `_`, no leading `.` or `_` and no
/// trailing `_`, at most 64 bytes; `None` without a letter or digit.
pub fn sanitize_name(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    // Cut first, then trim the trailing `_`: a cut must not leave one.
    let mut out = out.trim_start_matches(['.', '_']).to_owned();
    out.truncate(64);
    let out = out.trim_end_matches('_');
    out.bytes()
        .any(|b| b.is_ascii_alphanumeric())
        .then(|| out.to_owned())
}

/// Where a mount named `name` goes: `FILES_PATH/corn/<sanitized name>`.
pub fn mount_path(files_path: &Path, name: &str) -> Option<PathBuf> {
    Some(files_path.join(MOUNTS_DIR).join(sanitize_name(name)?))
}

#[cfg(test)]
#[path = "config_fuzz_test.rs"]
mod fuzz_test;

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(id: &str, name: &str) -> MountConfig {
        MountConfig {
            id: id.into(),
            name: name.into(),
            kind: "rclone".into(),
            enabled: true,
            desired_mounted: true,
            mount_path: format!("/files/corn/{name}"),
            smb_server: String::new(),
            smb_share: String::new(),
            smb_username: String::new(),
            smb_password_obscured: String::new(),
            smb_domain: String::new(),
            rclone_remote: "gdrive".into(),
            rclone_path: "media".into(),
            cache_max_size: "50G".into(),
            cache_max_age: "24h".into(),
            dir_cache_time: "5m".into(),
            polling_enabled: true,
            polling_interval_ms: 30_000,
        }
    }

    #[test]
    fn a_file_round_trips_in_the_original_format() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mounts/mounts.json");
        let (mut m, aside) = Mounts::open(&file, 1).unwrap();
        assert!(m.mounts.is_empty() && aside.is_none());
        m.mounts
            .push(mount("0b9a5a4e-2f3c-4e0a-9d55-3f1c2b7a8e10", "films"));
        m.save().unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["version"], 1);
        let first = &v["mounts"][0];
        for key in [
            "id",
            "name",
            "type",
            "enabled",
            "desiredMounted",
            "mountPath",
            "rcloneRemote",
            "rclonePath",
            "cacheMaxSize",
            "cacheMaxAge",
            "dirCacheTime",
            "pollingEnabled",
            "pollingIntervalMs",
        ] {
            assert!(first.get(key).is_some(), "{key} in {first}");
        }
        assert!(
            first.get("smbServer").is_none(),
            "empty SMB members are left out"
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let (again, _) = Mounts::open(&file, 2).unwrap();
        assert_eq!(again.mounts, m.mounts);
    }

    #[test]
    fn defaults_fill_what_an_older_file_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mounts.json");
        std::fs::write(
            &file,
            r#"{"version":1,"mounts":[{"id":"x","name":"n","type":"smb","enabled":false,"desiredMounted":false,"mountPath":"/files/corn/n","smbServer":"nas","smbShare":"media"}]}"#,
        )
        .unwrap();
        let (m, aside) = Mounts::open(&file, 1).unwrap();
        assert!(aside.is_none());
        let c = &m.mounts[0];
        assert_eq!(
            (
                c.cache_max_size.as_str(),
                c.cache_max_age.as_str(),
                c.dir_cache_time.as_str()
            ),
            ("50G", "24h", "5m")
        );
        assert!(c.polling_enabled);
        assert_eq!(c.polling_interval_ms, 30_000);
        assert_eq!(c.smb_server, "nas");
    }

    #[test]
    fn an_unreadable_file_is_set_aside_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mounts.json");
        for (n, bad) in [r#"{"version":1,"mounts":"#, r#"{"version":9,"mounts":[]}"#]
            .iter()
            .enumerate()
        {
            std::fs::write(&file, bad).unwrap();
            let (m, aside) = Mounts::open(&file, 100 + n as u64).unwrap();
            let (kept, why) = aside.expect("set aside");
            assert!(m.mounts.is_empty());
            assert_eq!(
                std::fs::read_to_string(&kept).unwrap(),
                *bad,
                "kept as it was"
            );
            assert!(!file.exists(), "{why}");
        }
    }

    #[test]
    fn names_become_one_safe_folder_under_corn() {
        assert_eq!(sanitize_name("My Drive").as_deref(), Some("My_Drive"));
        assert_eq!(sanitize_name("../../etc").as_deref(), Some("etc"));
        assert_eq!(sanitize_name(".hidden").as_deref(), Some("hidden"));
        assert_eq!(sanitize_name("a/b\0c").as_deref(), Some("a_b_c"));
        assert_eq!(sanitize_name("  "), None);
        assert_eq!(sanitize_name(".."), None);
        assert_eq!(sanitize_name("///"), None);
        assert_eq!(sanitize_name("-.-"), None);
        assert_eq!(sanitize_name(&"x".repeat(100)).unwrap().len(), 64);
        // Found by the property tests: a cut at 64 bytes left a trailing
        // `_` that the name's own rule trims.
        let cut = format!("{} b", "a".repeat(63));
        assert_eq!(sanitize_name(&cut), Some("a".repeat(63)));
        assert_eq!(
            mount_path(Path::new("/files"), "nas share").unwrap(),
            Path::new("/files/corn/nas_share")
        );
    }
}
