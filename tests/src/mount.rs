//! A tmpfs mounted for a test (a second filesystem, or a small one),
//! unmounted when dropped. Mounting needs root; CI runs as root.

use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it) at `at`,
    /// made if missing.
    pub fn at(at: &Path, size: &str) -> Self {
        std::fs::create_dir_all(at).expect("make the mount point");
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "mounting a tmpfs at {} needs root (CI runs as root)",
            at.display()
        );
        Self(at.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}
