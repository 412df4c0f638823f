//! Property tests of `watchers.json` as watcherd finds it (any bytes, a
//! file it wrote with a byte changed) and of watcher paths as a client
//! gives them: a file is read or set aside, never a panic, and the
//! defaults are there after; what was read reads back the same; a path
//! is refused or is a folder inside `FILES_PATH` in its one spelling.
//! `cargo test -p watcherd fuzz`.

use std::path::Component;

use metacore::api::watcherd::WatcherConfig;
use metacore::testing::cases;
use proptest::prelude::*;
use proptest::sample::Index;

use super::*;

/// A `META_CORE_PATH` and a `FILES_PATH` with a few folders, a file, and
/// a link to a folder outside it.
struct Env {
    dir: tempfile::TempDir,
    meta: PathBuf,
    files: PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir().expect("a temp dir");
    let meta = dir.path().join("meta-core");
    let files = dir.path().join("files");
    for d in ["watch", "plugin", "a/b", "c d"] {
        std::fs::create_dir_all(files.join(d)).expect("a folder");
    }
    std::fs::create_dir_all(&meta).expect("meta-core");
    std::fs::create_dir_all(dir.path().join("outside")).expect("outside");
    std::fs::write(files.join("a/file"), b"x").expect("a file");
    std::os::unix::fs::symlink(dir.path().join("outside"), files.join("out")).expect("a link");
    std::os::unix::fs::symlink(files.join("a"), files.join("in")).expect("a link");
    Env { dir, meta, files }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z0-9/._-]{1,12}", any::<String>()]
}

fn watcher() -> impl Strategy<Value = WatcherConfig> {
    (text(), text(), any::<u64>(), any::<bool>(), any::<u64>()).prop_map(
        |(id, path, interval_ms, enabled, created_at)| WatcherConfig {
            id,
            path,
            interval_ms,
            enabled,
            created_at,
        },
    )
}

/// `watchers.json` as watcherd writes it.
fn file() -> impl Strategy<Value = (Vec<WatcherConfig>, Vec<u8>)> {
    prop::collection::vec(watcher(), 0..4).prop_map(|watchers| {
        let body = WatchersFile {
            version: VERSION,
            watchers: watchers.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&body).expect("the file serializes");
        (watchers, bytes)
    })
}

/// Opens `bytes` as `watchers.json` and checks what holds whatever they
/// are: read or set aside with its bytes kept, the defaults there after,
/// and the file left behind read back the same. The watchers read.
fn open(bytes: &[u8]) -> Result<Vec<WatcherConfig>, TestCaseError> {
    let e = env();
    let file = e.meta.join(FILE_NAME);
    std::fs::write(&file, bytes).expect("the file is written");
    let (w, opened) = Watchers::open(&e.meta, &e.files, 7).expect("opens");
    if let Some((kept, _why)) = &opened.set_aside {
        prop_assert_eq!(&std::fs::read(kept).expect("kept"), bytes);
    }
    for d in DEFAULT_DIRS {
        let path = e.files.join(d).display().to_string();
        prop_assert!(w.list().iter().any(|c| c.path == path), "{} missing", path);
    }
    let (again, reopened) = Watchers::open(&e.meta, &e.files, 8).expect("opens again");
    prop_assert_eq!(reopened, Opened::default(), "what watcherd left it reads");
    prop_assert_eq!(again.list(), w.list());
    drop(e.dir);
    Ok(w.list().to_vec())
}

/// A path a client may give: a folder of the environment, as written
/// absolute or relative, with `.`, `//` or a trailing `/` now and then.
fn near_path() -> impl Strategy<Value = String> {
    let dir = prop::sample::select(vec![
        "", "watch", "plugin", "a", "a/b", "c d", "a/file", "out", "in", "in/b", "nope", "..",
    ]);
    (dir, 0..6u8, any::<bool>()).prop_map(|(d, form, absolute)| {
        let d = match form {
            0 => format!("./{d}"),
            1 => d.replace('/', "//"),
            2 => format!("{d}/"),
            3 => format!("{d}/."),
            4 => format!("a/../{d}"),
            _ => d.to_owned(),
        };
        if absolute { format!("@FILES@/{d}") } else { d }
    })
}

/// Checks `raw` as a watcher path: refused, or a folder inside
/// `FILES_PATH`, absolute, without `..` or a trailing `/`, that is its own
/// checked form.
fn check(e: &Env, raw: &str) -> Result<(), TestCaseError> {
    let raw = raw.replace("@FILES@", &e.files.display().to_string());
    let Ok(path) = check_path(&e.files, &raw) else {
        return Ok(());
    };
    let p = Path::new(&path);
    prop_assert!(
        p.is_absolute() && p.starts_with(&e.files),
        "{:?} from {:?}",
        path,
        raw
    );
    prop_assert!(
        p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::RootDir)),
        "{:?}",
        path
    );
    prop_assert!(!path.ends_with('/'), "{:?}", path);
    let real = std::fs::canonicalize(p).expect("it exists");
    let root = std::fs::canonicalize(&e.files).expect("FILES_PATH exists");
    prop_assert!(
        real.starts_with(&root) && real.is_dir(),
        "{:?} is {:?}",
        path,
        real
    );
    prop_assert_eq!(
        check_path(&e.files, &path).ok(),
        Some(path.clone()),
        "one spelling"
    );
    Ok(())
}

// Each case writes and syncs watchers.json: fewer cases.
proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn any_bytes_in_watchers_json_are_read_or_set_aside(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        open(&bytes)?;
    }

    #[test]
    fn watchers_json_as_watcherd_writes_it_reads_back((watchers, bytes) in file()) {
        let read = open(&bytes)?;
        prop_assert_eq!(&read[..watchers.len()], &watchers[..]);
    }

    #[test]
    fn a_damaged_watchers_json_is_read_or_set_aside(
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
    fn any_text_is_a_watcher_path_inside_files_path_or_refused(
        raws in prop::collection::vec(any::<String>(), 1..8),
    ) {
        let e = env();
        for raw in &raws {
            check(&e, raw)?;
        }
    }

    #[test]
    fn a_near_valid_path_is_a_folder_inside_files_path_in_one_spelling_or_refused(
        raws in prop::collection::vec(near_path(), 1..8),
        at in any::<Index>(),
        with in prop::sample::select(vec!['/', '.', '\0', ' ', 'a']),
    ) {
        let e = env();
        for raw in &raws {
            check(&e, raw)?;
            let mut chars: Vec<char> = raw.chars().collect();
            chars.insert(at.index(chars.len() + 1), with);
            check(&e, &chars.into_iter().collect::<String>())?;
        }
    }
}
