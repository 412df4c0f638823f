//! Property tests of `mounts.json` as mountd finds it (any bytes, a file
//! it wrote with a byte changed) and of mount names as a client gives
//! them: a file is read or set aside, never a panic; what is read saves
//! and reads back the same; a name becomes one safe folder under `corn/`
//! or is refused, and a sanitized name is its own sanitized form.
//! `cargo test -p mountd fuzz`.

use std::path::Component;

use metacore::api::mountd::MountConfig;
use metacore::testing::cases;
use proptest::prelude::*;
use proptest::sample::Index;

use super::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z0-9:/._-]{1,12}", any::<String>()]
}

fn mount() -> impl Strategy<Value = MountConfig> {
    (
        (
            text(),
            text(),
            prop::sample::select(vec!["rclone", "smb", "other"]),
        ),
        (any::<bool>(), any::<bool>(), text()),
        (text(), text(), text(), text(), text()),
        (text(), text(), text(), text(), text()),
        (any::<bool>(), any::<u64>()),
    )
        .prop_map(
            |(
                (id, name, kind),
                (enabled, desired_mounted, mount_path),
                (smb_server, smb_share, smb_username, smb_password_obscured, smb_domain),
                (rclone_remote, rclone_path, cache_max_size, cache_max_age, dir_cache_time),
                (polling_enabled, polling_interval_ms),
            )| MountConfig {
                id,
                name,
                kind: kind.into(),
                enabled,
                desired_mounted,
                mount_path,
                smb_server,
                smb_share,
                smb_username,
                smb_password_obscured,
                smb_domain,
                rclone_remote,
                rclone_path,
                cache_max_size,
                cache_max_age,
                dir_cache_time,
                polling_enabled,
                polling_interval_ms,
            },
        )
}

/// `mounts.json` as mountd writes it.
fn file() -> impl Strategy<Value = (Vec<MountConfig>, Vec<u8>)> {
    prop::collection::vec(mount(), 0..4).prop_map(|mounts| {
        let body = MountsFile {
            version: VERSION,
            mounts: mounts.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&body).expect("the file serializes");
        (mounts, bytes)
    })
}

/// Opens `bytes` as `mounts.json` and checks what holds whatever they
/// are: read, or set aside with the bytes kept; what was read saves and
/// reads back the same. The mounts read, or `None` when set aside.
fn open(bytes: &[u8]) -> Result<Option<Vec<MountConfig>>, TestCaseError> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("mounts/mounts.json");
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("made");
    std::fs::write(&path, bytes).expect("the file is written");
    let (m, aside) = Mounts::open(&path, 7).expect("opens");
    if let Some((kept, _why)) = aside {
        prop_assert!(m.mounts.is_empty());
        prop_assert!(!path.exists(), "never left in place");
        prop_assert_eq!(std::fs::read(&kept).expect("kept"), bytes);
        return Ok(None);
    }
    m.save().expect("saves");
    let (again, aside) = Mounts::open(&path, 8).expect("opens again");
    prop_assert!(aside.is_none(), "what mountd wrote it reads");
    prop_assert_eq!(&again.mounts, &m.mounts);
    Ok(Some(m.mounts))
}

/// What a sanitized name is, said again apart from the code.
fn is_folder_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !s.starts_with(['.', '_'])
        && !s.ends_with('_')
        && s.bytes().any(|b| b.is_ascii_alphanumeric())
}

// Each case writes and syncs the file twice: fewer cases.
proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn any_bytes_in_mounts_json_are_read_or_set_aside(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        open(&bytes)?;
    }

    #[test]
    fn mounts_json_as_mountd_writes_it_reads_back_whole((mounts, bytes) in file()) {
        prop_assert_eq!(open(&bytes)?, Some(mounts));
    }

    #[test]
    fn a_damaged_mounts_json_is_read_or_set_aside(
        (_, mut bytes) in file(),
        at in any::<Index>(),
        with in any::<u8>(),
        cut in any::<bool>(),
    ) {
        let i = at.index(bytes.len());
        if cut {
            bytes.truncate(i);
        } else {
            bytes[i] = with;
        }
        open(&bytes)?;
    }
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn any_name_is_one_safe_folder_under_corn_or_refused(name in any::<String>()) {
        check_name(&name)?;
    }

    #[test]
    fn a_long_or_dotted_name_is_one_safe_folder_under_corn_or_refused(
        name in "[a-zA-Z0-9 ./_-]{0,80}",
    ) {
        check_name(&name)?;
    }
}

fn check_name(name: &str) -> Result<(), TestCaseError> {
    let Some(folder) = sanitize_name(name) else {
        prop_assert!(mount_path(Path::new("/files"), name).is_none());
        return Ok(());
    };
    prop_assert!(is_folder_name(&folder), "{:?} from {:?}", folder, name);
    let again = sanitize_name(&folder);
    prop_assert_eq!(
        again.as_deref(),
        Some(folder.as_str()),
        "a sanitized name is its own"
    );
    let path = mount_path(Path::new("/files"), name).expect("a path");
    let rel = path.strip_prefix("/files/corn").expect("under corn");
    let parts: Vec<_> = rel.components().collect();
    prop_assert!(matches!(parts[..], [Component::Normal(_)]), "{:?}", path);
    Ok(())
}
