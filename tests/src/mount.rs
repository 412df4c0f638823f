//! Filesystems mounted for a test, unmounted when dropped: a tmpfs (a
//! second filesystem, or a small one) and a loop-mounted ext4 image (a
//! volume that can fail on demand). Mounting needs root; CI runs as root.

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

/// An ext4 filesystem in an image file, loop-mounted for a test (a volume
/// that can fail on demand), unmounted when dropped. Needs root and loop
/// devices (`tests/build.rs` probes them: `no_loop_ext4`).
#[derive(Debug)]
pub struct LoopExt4 {
    image: PathBuf,
    at: PathBuf,
}

impl LoopExt4 {
    /// Makes a `size_mb` MiB ext4 image at `image` and mounts it at `at`
    /// (made if missing).
    pub fn at(image: &Path, at: &Path, size_mb: u64) -> Self {
        let file = std::fs::File::create(image).expect("create the image");
        file.set_len(size_mb << 20).expect("size the image");
        drop(file);
        let made = std::process::Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(image)
            .status()
            .is_ok_and(|s| s.success());
        assert!(made, "mkfs.ext4 {} (e2fsprogs)", image.display());
        std::fs::create_dir_all(at).expect("make the mount point");
        let volume = Self {
            image: image.to_owned(),
            at: at.to_owned(),
        };
        volume.mount();
        volume
    }

    fn mount(&self) {
        let ok = std::process::Command::new("mount")
            .args(["-o", "loop"])
            .arg(&self.image)
            .arg(&self.at)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "mount -o loop {} (needs root and loop devices)",
            self.image.display()
        );
    }

    /// Shuts the filesystem down as a failing disk would (ext4's
    /// `EXT4_IOC_SHUTDOWN`, after syncing it): from now on every read and
    /// write on it fails with EIO, until it is mounted again.
    pub fn fail(&self) {
        let dir = std::fs::File::open(&self.at).expect("open the mount point");
        // _IOR('X', 125, __u32); the flags: 0, sync the filesystem first.
        const SHUTDOWN: rustix::ioctl::Opcode = rustix::ioctl::opcode::read::<u32>(b'X', 125);
        // SAFETY: EXT4_IOC_SHUTDOWN reads one u32 from the pointer, which
        // the Setter owns for the call.
        #[allow(unsafe_code)]
        let shut =
            unsafe { rustix::ioctl::ioctl(&dir, rustix::ioctl::Setter::<SHUTDOWN, u32>::new(0)) };
        shut.expect("EXT4_IOC_SHUTDOWN");
    }

    /// Unmounts the failed filesystem (lazily: a process may hold files)
    /// and mounts the image again: a replaced or repaired disk.
    pub fn mount_again(&self) {
        let ok = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.at)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "umount -l {}", self.at.display());
        self.mount();
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.at)
            .status();
    }
}
