//! The temporary file an upload or a COPY is written to before it takes
//! its name.
//!
//! Where the filesystem can (ext4, xfs, btrfs, tmpfs), it is an unnamed
//! file (`O_TMPFILE`) in the target's folder: nobody sees it while it is
//! written, and if apid dies meanwhile (kill -9, a crash, the power) the
//! kernel frees it, so nothing is left behind. It is given a name only
//! when complete: linked straight to the target's name when nothing is
//! there (`link` never replaces), else linked as a hidden name and renamed
//! over the target (the one moment a killed apid would leave a hidden
//! file). Where the filesystem cannot (FUSE mounts
//! under `corn/`), it is a hidden named file (`.<name>.dav-<...>.part`,
//! skipped by the watcher), removed when the upload fails.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

/// Mode of the files WebDAV makes, whatever apid's umask: the services
/// that share the volume read them.
pub(crate) const FILE_MODE: u32 = 0o644;

/// How the temporary file is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Temp {
    /// `O_TMPFILE`: no name until it is complete.
    Anonymous,
    /// A hidden name in the target's folder.
    Named(OsString),
}

/// A hidden, unique name for a file on its way to `name`.
pub(crate) fn hidden_name(name: &OsStr) -> OsString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let base = &name.as_bytes()[..name.len().min(100)];
    let mut t = b".".to_vec();
    t.extend_from_slice(base);
    t.extend_from_slice(format!(".dav-{:x}-{stamp:x}-{n:x}.part", std::process::id()).as_bytes());
    OsString::from_vec(t)
}

/// A temporary file in `dir` for `name`.
pub(crate) fn create(dir: &impl AsFd, name: &OsStr) -> io::Result<(std::fs::File, Temp)> {
    let mode = Mode::from_raw_mode(FILE_MODE);
    match rustix::fs::openat(
        dir,
        ".",
        OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
        mode,
    ) {
        Ok(fd) => {
            rustix::fs::fchmod(&fd, mode)?;
            return Ok((fd.into(), Temp::Anonymous));
        }
        // No O_TMPFILE here (FUSE, older filesystems): a named file.
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOSYS) => {}
        Err(e) => return Err(e.into()),
    }
    loop {
        let tmp = hidden_name(name);
        match rustix::fs::openat(
            dir,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            mode,
        ) {
            Ok(fd) => {
                rustix::fs::fchmod(&fd, mode)?;
                return Ok((fd.into(), Temp::Named(tmp)));
            }
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Gives the complete temporary `file` the name `name` in `dir`,
/// replacing what is there unless `no_replace` (then `EEXIST`).
pub(crate) fn commit(
    dir: &impl AsFd,
    file: &std::fs::File,
    temp: &Temp,
    name: &OsStr,
    no_replace: bool,
) -> io::Result<()> {
    let named = match temp {
        Temp::Named(tmp) => tmp.clone(),
        Temp::Anonymous => {
            let me = format!("/proc/self/fd/{}", file.as_raw_fd());
            let link = |to: &OsStr| {
                rustix::fs::linkat(rustix::fs::CWD, &me, dir, to, AtFlags::SYMLINK_FOLLOW)
            };
            match link(name) {
                // A new name: linked straight, nothing hidden in between.
                Ok(()) => return Ok(()),
                Err(Errno::EXIST) if !no_replace => {}
                Err(e) => return Err(e.into()),
            }
            // A replacement: a hidden link, renamed over the target (apid
            // killed between the two leaves the hidden link).
            loop {
                let tmp = hidden_name(name);
                match link(&tmp) {
                    Ok(()) => break tmp,
                    Err(Errno::EXIST) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
    };
    let flags = if no_replace {
        RenameFlags::NOREPLACE
    } else {
        RenameFlags::empty()
    };
    rustix::fs::renameat_with(dir, &named, dir, name, flags).inspect_err(|_| {
        let _ = rustix::fs::unlinkat(dir, &named, AtFlags::empty());
    })?;
    Ok(())
}

/// Removes a temporary file that will not be committed (an unnamed one
/// goes with its last descriptor).
pub(crate) fn discard(dir: &impl AsFd, temp: &Temp) {
    if let Temp::Named(tmp) = temp {
        let _ = rustix::fs::unlinkat(dir, tmp, AtFlags::empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn an_unnamed_temporary_is_invisible_until_committed() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(d.path()).unwrap();
        std::fs::write(d.path().join("t"), b"old").unwrap();
        let (mut f, temp) = create(&dir, OsStr::new("t")).unwrap();
        assert_eq!(temp, Temp::Anonymous, "the test volume has O_TMPFILE");
        f.write_all(b"new").unwrap();
        assert_eq!(names(d.path()), ["t"]);
        assert!(commit(&dir, &f, &temp, OsStr::new("t"), true).is_err());
        commit(&dir, &f, &temp, OsStr::new("t"), false).unwrap();
        assert_eq!(names(d.path()), ["t"]);
        assert_eq!(std::fs::read(d.path().join("t")).unwrap(), b"new");
        let (g, temp) = create(&dir, OsStr::new("u")).unwrap();
        commit(&dir, &g, &temp, OsStr::new("u"), true).unwrap();
        assert_eq!(names(d.path()), ["t", "u"]);
        let (h, temp) = create(&dir, OsStr::new("v")).unwrap();
        drop(h);
        discard(&dir, &temp);
        assert_eq!(
            names(d.path()),
            ["t", "u"],
            "a dropped temporary leaves nothing"
        );
    }

    #[test]
    fn hidden_names_are_hidden_unique_and_short() {
        let long = OsString::from("x".repeat(255));
        let a = hidden_name(&long);
        assert_ne!(a, hidden_name(&long));
        assert!(a.as_bytes().starts_with(b"."));
        assert!(a.len() < 200, "{}", a.len());
    }
}
