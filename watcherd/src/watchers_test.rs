//! `watchers.json`: its format, the defaults, and the path rules.

use std::os::unix::fs::PermissionsExt;

use metacore::error::ErrorCode;

use super::*;

struct Env {
    _dir: tempfile::TempDir,
    meta: PathBuf,
    files: PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta-core");
    let files = dir.path().join("files");
    std::fs::create_dir_all(&meta).unwrap();
    std::fs::create_dir_all(&files).unwrap();
    Env {
        _dir: dir,
        meta,
        files,
    }
}

fn on_disk(e: &Env) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(e.meta.join(FILE_NAME)).unwrap()).unwrap()
}

#[test]
fn first_start_seeds_the_defaults_in_the_original_format() {
    let e = env();
    let (w, opened) = Watchers::open(&e.meta, &e.files, 1_700_000_000_000).unwrap();
    let want: Vec<String> = DEFAULT_DIRS
        .iter()
        .map(|d| e.files.join(d).display().to_string())
        .collect();
    assert_eq!(opened.seeded, want);
    assert!(e.files.join("watch").is_dir() && e.files.join("plugin").is_dir());
    let v = on_disk(&e);
    assert_eq!(v["version"], 1);
    let first = &v["watchers"][0];
    assert_eq!(first["path"], want[0].as_str());
    assert_eq!(first["intervalMs"], 30_000);
    assert_eq!(first["enabled"], true);
    assert_eq!(first["createdAt"], 1_700_000_000_000u64);
    let id = first["id"].as_str().unwrap();
    assert!(id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(w.list().len(), 2);
    let text = std::fs::read_to_string(e.meta.join(FILE_NAME)).unwrap();
    assert!(
        text.contains("\n  \"watchers\": ["),
        "two-space indent: {text}"
    );
    let mode = std::fs::metadata(e.meta.join(FILE_NAME))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_removed_default_comes_back_and_the_rest_is_kept() {
    let e = env();
    let (mut w, _) = Watchers::open(&e.meta, &e.files, 1).unwrap();
    std::fs::create_dir_all(e.files.join("movies")).unwrap();
    let mine = w
        .create(
            NewWatcher {
                path: "movies".into(),
                interval_ms: Some(60_000),
                enabled: Some(true),
            },
            2,
        )
        .unwrap();
    let plugin = w.list()[1].id.clone();
    w.delete(&plugin).unwrap();
    let (w, opened) = Watchers::open(&e.meta, &e.files, 3).unwrap();
    assert_eq!(
        opened.seeded,
        [e.files.join("plugin").display().to_string()]
    );
    assert!(w.list().contains(&mine));
    assert_eq!(w.list().len(), 3);
    // Nothing missing: reopening changes nothing on disk.
    let before = std::fs::read(e.meta.join(FILE_NAME)).unwrap();
    let (_, opened) = Watchers::open(&e.meta, &e.files, 4).unwrap();
    assert_eq!(opened, Opened::default());
    assert_eq!(std::fs::read(e.meta.join(FILE_NAME)).unwrap(), before);
}

#[test]
fn an_unreadable_file_is_set_aside_not_overwritten() {
    for bad in [&b"{not json"[..], br#"{"version":2,"watchers":[]}"#] {
        let e = env();
        std::fs::write(e.meta.join(FILE_NAME), bad).unwrap();
        let (w, opened) = Watchers::open(&e.meta, &e.files, 1747).unwrap();
        let (aside, why) = opened.set_aside.expect("set aside");
        assert_eq!(aside, e.meta.join("watchers.json.unreadable-1747"));
        assert_eq!(std::fs::read(&aside).unwrap(), bad, "{why}");
        assert_eq!(w.list().len(), 2, "the defaults start over");
    }
}

#[test]
fn create_follows_the_originals_rules() {
    let e = env();
    let (mut w, _) = Watchers::open(&e.meta, &e.files, 1).unwrap();
    std::fs::create_dir_all(e.files.join("a/b")).unwrap();
    let c = w
        .create(
            NewWatcher {
                path: e.files.join("a/b/").display().to_string(),
                interval_ms: Some(10),
                enabled: None,
            },
            9,
        )
        .unwrap();
    assert_eq!(c.path, e.files.join("a/b").display().to_string());
    assert_eq!(c.interval_ms, DEFAULT_INTERVAL_MS, "under 5 s becomes 30 s");
    assert!(!c.enabled, "off unless asked");
    assert_eq!(c.created_at, 9);
    let again = w.create(
        NewWatcher {
            path: "a/b".into(),
            ..NewWatcher::default()
        },
        10,
    );
    assert_eq!(again.unwrap_err().code, ErrorCode::BadRequest);
    let (w2, _) = Watchers::open(&e.meta, &e.files, 11).unwrap();
    assert_eq!(w2.get(&c.id).unwrap(), &c, "persisted");
}

#[test]
fn update_raises_a_short_interval_and_unknown_ids_are_404() {
    let e = env();
    let (mut w, _) = Watchers::open(&e.meta, &e.files, 1).unwrap();
    let id = w.list()[0].id.clone();
    let c = w
        .update(
            &id,
            WatcherUpdate {
                interval_ms: Some(100),
                enabled: Some(false),
                ..WatcherUpdate::default()
            },
        )
        .unwrap();
    assert_eq!((c.interval_ms, c.enabled), (MIN_INTERVAL_MS, false));
    for r in [
        w.update("nope", WatcherUpdate::default()).map(|_| ()),
        w.delete("nope").map(|_| ()),
        w.get("nope").map(|_| ()),
    ] {
        let e = r.unwrap_err();
        assert_eq!(e.code, ErrorCode::NotFound);
        assert_eq!(e.message, "watcher not found: nope");
    }
}

#[test]
fn paths_outside_files_path_or_odd_are_refused() {
    let e = env();
    let outside = e.files.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, e.files.join("link")).unwrap();
    std::fs::write(e.files.join("a-file"), b"x").unwrap();
    for raw in [
        "".to_owned(),
        "watch/../..".to_owned(),
        "../elsewhere".to_owned(),
        outside.display().to_string(),
        "link".to_owned(),
        "missing".to_owned(),
        "a-file".to_owned(),
        "wat\0ch".to_owned(),
    ] {
        let r = check_path(&e.files, &raw);
        assert_eq!(r.unwrap_err().code, ErrorCode::BadRequest, "{raw:?}");
    }
    std::fs::create_dir_all(e.files.join("ok/sub")).unwrap();
    let ok = e.files.join("ok").display().to_string();
    // One folder, one spelling.
    for raw in [
        "ok",
        "./ok",
        "ok/",
        "ok/.",
        &format!("{ok}//"),
        &format!("{ok}/./"),
    ] {
        assert_eq!(check_path(&e.files, raw).unwrap(), ok, "{raw:?}");
    }
    assert_eq!(
        check_path(&e.files, "ok//sub").unwrap(),
        e.files.join("ok/sub").display().to_string()
    );
}
