//! The judgement of what a mount serves and where it goes.

use super::*;
use crate::rc::Features;

fn places(dir: &Path) -> Places {
    places_with_files(dir, &dir.join("files"))
}

/// The places under `dir`, FILES_PATH at `files`.
fn places_with_files(dir: &Path, files: &Path) -> Places {
    let d = dir.display();
    let env = [
        ("META_CORE_PATH", format!("{d}/mc")),
        ("FILES_PATH", files.display().to_string()),
        ("META_CORE_DB_PATH", format!("{d}/db/meta-core.db")),
        ("META_CORE_RUN_DIR", format!("{d}/run")),
    ];
    let config = Config::from_lookup(|k| {
        env.iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.clone())
    })
    .unwrap();
    Places::new(&config)
}

fn mount(remote: &str) -> MountConfig {
    serde_json::from_value(serde_json::json!({"id": "m", "name": "m", "type": "rclone",
        "enabled": true, "desiredMounted": true, "mountPath": "", "rcloneRemote": remote,
        "rclonePath": "p"}))
    .unwrap()
}

/// [`served`] of `c` where rclone says `remote:path` is the local folder
/// `joined` and `remote:` the local folder `own`.
fn judge(c: &MountConfig, joined: &Path, own: &Path, p: &Places) -> Result<(), Refusal> {
    let local = |root: &Path| info(&root.display().to_string(), true);
    served(c, &local(joined), &local(own), p)
}

fn info(root: &str, is_local: bool) -> FsInfo {
    FsInfo {
        root: root.into(),
        features: Features { is_local },
    }
}

#[test]
fn overlap_is_by_whole_components_both_ways() {
    let (a, b) = (Path::new("/data"), Path::new("/data/db"));
    assert!(overlaps(a, b) && overlaps(b, a) && overlaps(a, a));
    assert!(!overlaps(Path::new("/data2"), a));
    assert!(overlaps(Path::new("/"), a));
}

#[test]
fn a_missing_path_resolves_through_its_existing_part() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(real.join("target")).unwrap();
    std::os::unix::fs::symlink(real.join("target"), real.join("link")).unwrap();
    assert_eq!(resolve(&real.join("link")), (real.join("target"), true));
    assert_eq!(
        resolve(&real.join("link/a/b")),
        (real.join("target/a/b"), false)
    );
    assert_eq!(
        resolve(&real.join("link/a/../c")),
        (real.join("target/c"), false)
    );
}

#[test]
fn a_local_folder_in_or_around_a_place_is_refused_by_the_places_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::canonicalize(dir.path()).unwrap();
    for sub in ["mc/db", "media", "db"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    std::os::unix::fs::symlink(d.join("mc"), d.join("media/link")).unwrap();
    let p = places(&d);
    let c = mount("al");
    // The remote's root is the folder served, or (media/link) holds it.
    let refused = |root: &Path| {
        let own = if root.starts_with(d.join("media")) {
            d.join("media")
        } else {
            root.to_path_buf()
        };
        match judge(&c, root, &own, &p) {
            Err(Refusal::Overlaps { place, .. } | Refusal::RootOverlaps { place, .. }) => {
                Some(place)
            }
            _ => None,
        }
    };
    assert!(matches!(
        judge(&c, &d.join("media/link"), &d.join("media"), &p),
        Err(Refusal::Overlaps { .. })
    ));
    assert_eq!(refused(Path::new("/")), Some(Place::MetaCorePath));
    assert_eq!(refused(&d), Some(Place::MetaCorePath));
    assert_eq!(refused(&d.join("mc/db")), Some(Place::MetaCorePath));
    assert_eq!(refused(&d.join("media/link")), Some(Place::MetaCorePath));
    assert_eq!(refused(&d.join("db")), Some(Place::DbFolder));
    assert_eq!(refused(&d.join("files/plugin")), Some(Place::FilesPath));
    assert_eq!(refused(&d.join("run")), Some(Place::RunDir));
    // The log dir defaults to META_CORE_PATH/logs.
    assert_eq!(refused(&d.join("mc/logs/x")), Some(Place::MetaCorePath));
    assert_eq!(refused(&d.join("media")), None);
    assert!(judge(&c, &d.join("media"), &d.join("media"), &p).is_ok());
    assert!(matches!(
        judge(&c, &d.join("media/later"), &d.join("media"), &p),
        Err(Refusal::Missing { .. })
    ));
    // Local without a folder named (rclone's `hasher` over a local
    // folder reports `Root: ""`): it cannot be checked.
    for root in ["relative", ""] {
        assert!(matches!(
            served(&c, &info(root, true), &info(root, true), &p),
            Err(Refusal::NoFolder { .. })
        ));
    }
    // Not a local folder (a network remote, a union): not judged here.
    assert!(served(&c, &info("/", false), &info("/", false), &p).is_ok());
    // No message shows a place's path.
    let e = Refusal::Overlaps {
        remote: "al".into(),
        path: "p".into(),
        place: Place::DbFolder,
    }
    .to_string();
    assert!(e.starts_with("rcloneRemote") && e.contains("META_CORE_DB_PATH"));
    assert!(!e.contains(&d.display().to_string()), "{e}");
}

/// Review finding 4: an alias of `/` with `rclonePath: "etc"` served the
/// host's `/etc`, the joined root overlapping none of the places.
#[test]
fn a_remotes_own_root_that_holds_a_place_is_refused_whatever_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::canonicalize(dir.path()).unwrap();
    for sub in ["srv/media/films", "elsewhere", "files"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    std::os::unix::fs::symlink(d.join("elsewhere"), d.join("srv/media/out")).unwrap();
    let p = places(&d);
    let c = mount("al");
    let root_refused = |joined: &Path, own: &Path| match judge(&c, joined, own, &p) {
        Err(Refusal::RootOverlaps { place, .. }) => Some(place),
        _ => None,
    };
    // `/` and the folder that holds meta-core's places, whatever the path.
    for joined in ["/etc", "/proc/1", "/root"] {
        let got = root_refused(Path::new(joined), Path::new("/"));
        assert_eq!(got, Some(Place::MetaCorePath), "{joined}");
    }
    assert_eq!(root_refused(&d.join("srv"), &d), Some(Place::MetaCorePath));
    // `/srv` when FILES_PATH is `/srv/files`.
    let srv = places_with_files(&d, &d.join("srv/files"));
    let got = match judge(&c, &d.join("srv/media"), &d.join("srv"), &srv) {
        Err(Refusal::RootOverlaps { place, .. }) => Some(place),
        _ => None,
    };
    assert_eq!(got, Some(Place::FilesPath));
    // A root of its own: a sub-path is taken, a missing one waits.
    let media = d.join("srv/media");
    assert!(judge(&c, &media.join("films"), &media, &p).is_ok());
    assert!(matches!(
        judge(&c, &media.join("later"), &media, &p),
        Err(Refusal::Missing { .. })
    ));
    // Out of the root: by a symlink, or a root rclone did not clean.
    for joined in [media.join("out"), d.join("elsewhere")] {
        assert!(
            matches!(judge(&c, &joined, &media, &p), Err(Refusal::Outside { .. })),
            "{}",
            joined.display()
        );
    }
    // A root that rclone names no absolute local folder for.
    let joined = info(&media.display().to_string(), true);
    for own in [info("", true), info("relative", true), info("/", false)] {
        assert_eq!(
            served(&c, &joined, &own, &p),
            Err(Refusal::NoRoot("al".into()))
        );
    }
    // The message says what to do, and shows no path.
    let e = Refusal::RootOverlaps {
        remote: "al".into(),
        place: Place::FilesPath,
    }
    .to_string();
    assert!(
        e.starts_with("rcloneRemote") && e.contains("FILES_PATH"),
        "{e}"
    );
    assert!(
        e.contains("point the alias at a folder that holds none of meta-core's places"),
        "{e}"
    );
    assert!(!e.contains(&d.display().to_string()), "{e}");
    let e = Refusal::Outside {
        remote: "al".into(),
        path: "out".into(),
    }
    .to_string();
    assert!(
        e.starts_with("rclonePath") && !e.contains(&d.display().to_string()),
        "{e}"
    );
}

#[test]
fn a_mount_folder_in_meta_core_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::canonicalize(dir.path()).unwrap();
    let p = places(&d);
    let corn = d.join("files/corn");
    std::fs::create_dir_all(&corn).unwrap();
    assert!(target(&p, &corn, &corn.join("x")).is_ok());
    // corn/ a symlink into META_CORE_PATH.
    std::fs::create_dir_all(d.join("mc/inside")).unwrap();
    let linked = d.join("files2");
    std::fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(d.join("mc/inside"), linked.join("corn")).unwrap();
    let e = target(&p, &linked.join("corn"), &linked.join("corn/x")).unwrap_err();
    assert!(e.contains("META_CORE_PATH"), "{e}");
    assert!(!e.contains("mc/inside"), "{e}");
    // META_CORE_PATH nested under corn/: its folder, or one above it.
    let nested = places(&corn.join("n"));
    let e = target(&nested, &corn, &corn.join("n")).unwrap_err();
    assert!(e.contains("META_CORE_PATH"), "{e}");
    assert!(target(&nested, &corn, &corn.join("n/mc")).is_err());
    assert!(target(&nested, &corn, &corn.join("other")).is_ok());
}
