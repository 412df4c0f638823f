//! What meta-core creates is private (files 0600, folders 0700) whatever
//! the umask it is started with; what the other services of the mesh read
//! is not: `kv-leader.info` and the registry's file 0644, and the folders
//! on their way (`META_CORE_PATH`, `locks/`, `services/`) 0755, and the
//! mounts' folders under `FILES_PATH/corn/` 0755.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use e2e::daemon::test_dir;
use e2e::fixtures::random_rid;
use e2e::supervisor::Launch;
use serde_json::json;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test]
async fn files_are_private_but_what_others_read() {
    for mask in ["022", "000"] {
        let dir = test_dir();
        let mut mc = Launch::in_dir(dir.path(), "run")
            .env(
                "RCLONE_CONFIG",
                &dir.path().join("rclone.conf").display().to_string(),
            )
            .spawn_with_umask(mask);
        mc.wait_all_ready().await;
        // A write, so the WAL and its index exist.
        let rid = random_rid();
        mc.ok_json("PATCH", &format!("/meta/{rid}"), &json!({"title": "T"}))
            .await;
        let root = mc.meta_core_path();
        let db = mc.db();
        let with = |suffix: &str| {
            let mut p = db.clone().into_os_string();
            p.push(suffix);
            std::path::PathBuf::from(p)
        };
        let mut private_files = vec![db.clone(), with("-wal"), with("-shm"), with(".lock")];
        private_files.push(root.join("locks/kv-leader.lock"));
        for e in std::fs::read_dir(mc.log_dir()).unwrap() {
            private_files.push(e.unwrap().path());
        }
        for e in std::fs::read_dir(mc.run_dir()).unwrap() {
            private_files.push(e.unwrap().path());
        }
        for f in &private_files {
            assert_eq!(mode(f), 0o600, "umask {mask}: {}", f.display());
        }
        for d in [db.parent().unwrap(), &mc.log_dir(), mc.run_dir()] {
            assert_eq!(mode(d), 0o700, "umask {mask}: {}", d.display());
        }
        assert_eq!(mode(&mc.info_file()), 0o644, "umask {mask}: kv-leader.info");
        for d in [root.clone(), root.join("locks"), root.join("services")] {
            assert_eq!(mode(&d), 0o755, "umask {mask}: {}", d.display());
        }
        // The shared folders of FILES_PATH other containers read (N17).
        let files = dir.path().join("files");
        for d in [files.clone(), files.join("watch"), files.join("plugin")] {
            assert_eq!(mode(&d), 0o755, "umask {mask}: {}", d.display());
        }
        // The admin token is the tree's own.
        assert_eq!(mode(&root.join("secrets")), 0o700, "umask {mask}: secrets/");
        assert_eq!(
            mode(&root.join("secrets/admin-token")),
            0o600,
            "umask {mask}: the token"
        );
        let own: Vec<_> = std::fs::read_dir(root.join("services"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(!own.is_empty(), "the registry file is there");
        for f in own {
            assert_eq!(mode(&f), 0o644, "umask {mask}: {}", f.display());
        }
        #[cfg(not(no_fuse))]
        {
            // A mount that cannot be made: mounts.json, the errors folder
            // and the error file are private; corn/ and the mount's folder
            // are read by the other services.
            let src = e2e::mountd::local_remote(dir.path(), "gone", &[]);
            let nowhere = src.join("nowhere").display().to_string();
            let r = mc
                .admin().send_json(
                    "POST",
                    "/api/mounts",
                    &json!({"name": "gone", "type": "rclone", "rcloneRemote": "gone", "rclonePath": nowhere}),
                )
                .await;
            assert_eq!(r.status, 201, "{}", r.text());
            let made = r.json();
            assert!(made["mount"]["error"].is_string(), "{made}");
            let id = made["mount"]["id"].as_str().unwrap();
            let mounts = root.join("mounts");
            for d in [mounts.clone(), mounts.join("errors")] {
                assert_eq!(mode(&d), 0o700, "umask {mask}: {}", d.display());
            }
            for f in [
                mounts.join("mounts.json"),
                mounts.join(format!("errors/{id}.error")),
            ] {
                assert_eq!(mode(&f), 0o600, "umask {mask}: {}", f.display());
            }
            let corn = dir.path().join("files/corn");
            for d in [corn.clone(), corn.join("gone")] {
                assert_eq!(mode(&d), 0o755, "umask {mask}: {}", d.display());
            }
        }
        mc.process.sigterm();
        mc.process.wait_exit().await;
    }
}
