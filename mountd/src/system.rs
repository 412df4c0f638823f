//! What mountd asks the kernel: which FUSE mounts exist
//! (`/proc/self/mountinfo`), whether one still answers, how to detach one
//! whose rclone is gone, and which files under a folder are open
//! (`/proc/<pid>/fd`).

use metacore::sync::Locked;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// How long a look at a mount point may take before the mount counts as
/// hung (a FUSE server that stopped answering blocks `stat`).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// One line of `/proc/self/mountinfo`, the members mountd reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// The kernel's id of the mount (a new one at every mount).
    pub id: u64,
    pub point: PathBuf,
    /// `fuse.rclone` for rclone's mounts.
    pub fstype: String,
    pub source: String,
}

/// The mounts of mountd's mount namespace.
pub fn mounts() -> Vec<MountEntry> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|text| parse_mountinfo(&text))
        .unwrap_or_default()
}

/// `id parent major:minor root point options [optional...] - fstype source
/// super-options`, with spaces and the like in paths written `\040`.
fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let id = fields.next()?.parse().ok()?;
            let point = fields.nth(3)?;
            let mut rest = fields.skip_while(|f| *f != "-");
            rest.next()?;
            let fstype = rest.next()?;
            let source = rest.next().unwrap_or_default();
            Some(MountEntry {
                id,
                point: PathBuf::from(unescape(point)),
                fstype: unescape(fstype),
                source: unescape(source),
            })
        })
        .collect()
}

/// Undoes the kernel's octal escapes (`\040` is a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 4 <= bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let n = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(n);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A local folder with every symlink resolved (as it is when missing).
pub fn resolved(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned())
}

/// `path` as the kernel's table names it: its folder's symlinks resolved
/// (the path itself is not looked at: it may be a mount that hangs).
pub fn real(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or_else(|_| path.to_owned()),
        _ => path.to_owned(),
    }
}

/// The mount at exactly `point`, if any (the last one, which is what a
/// path reaches when mounts are stacked).
pub fn mounted_at(entries: &[MountEntry], point: &Path) -> Option<MountEntry> {
    let point = real(point);
    entries.iter().rev().find(|e| e.point == point).cloned()
}

/// Whether `e` is one of rclone's FUSE mounts.
pub fn is_rclone(e: &MountEntry) -> bool {
    e.fstype == "fuse.rclone"
}

/// How a mount point answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// It lists.
    Answers,
    /// Its FUSE server is gone or hung; the text says which.
    Stale(String),
}

/// Mounts (by the kernel's mount id) whose last look has not come back: a
/// hung FUSE server holds the thread that looks, so a mount is looked at
/// again only once it has. A new mount at the same folder has a new id.
static LOOKING: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());

/// Looks at the mount `at`: a `stat` of its top, which rclone answers from
/// its own state (a slow remote does not make it stale; a gone or hung
/// rclone does), on the blocking pool, at most [`PROBE_TIMEOUT`].
pub async fn probe(at: &MountEntry) -> Probe {
    if !LOOKING.locked().insert(at.id) {
        return Probe::Stale("the last look at the mount has not come back".into());
    }
    let (p, id) = (at.point.clone(), at.id);
    let look = tokio::task::spawn_blocking(move || {
        let seen = std::fs::metadata(&p).map(|_| ());
        LOOKING.locked().remove(&id);
        seen
    });
    match tokio::time::timeout(PROBE_TIMEOUT, look).await {
        Ok(Ok(Ok(()))) => Probe::Answers,
        Ok(Ok(Err(e))) => Probe::Stale(e.to_string()),
        Ok(Err(e)) => Probe::Stale(format!("the look at the mount failed: {e}")),
        Err(_) => Probe::Stale(format!(
            "the mount did not answer within {} s",
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

/// Detaches the mount at `point` at once (`umount2(MNT_DETACH)`, or
/// `fusermount3 -uz` / `fusermount -uz` without the privilege): what is
/// open under it stays readable to its holder, nothing new can open it.
pub async fn detach(point: &Path) -> Result<(), String> {
    let p = point.to_owned();
    let direct = tokio::task::spawn_blocking(move || {
        rustix::mount::unmount(&p, rustix::mount::UnmountFlags::DETACH)
    })
    .await
    .map_err(|e| e.to_string())?;
    let errno = match direct {
        Ok(()) => return Ok(()),
        // Not a mount point (any more): nothing to do.
        Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => e,
    };
    for tool in ["fusermount3", "fusermount"] {
        let out = tokio::process::Command::new(tool)
            .arg("-uz")
            .arg(point)
            .stdin(std::process::Stdio::null())
            .output()
            .await;
        match out {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => {
                return Err(format!(
                    "cannot detach {}: {errno}; {tool}: {}",
                    point.display(),
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
            }
            Err(_) => continue,
        }
    }
    Err(format!(
        "cannot detach {}: {errno} (and no fusermount3 on the PATH)",
        point.display()
    ))
}

/// Files open under `dir` by any process mountd can see, and the working
/// folders inside it: the paths, at most `max` of them.
pub fn open_under(dir: &Path, max: usize) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for proc_dir in procs.flatten() {
        let name = proc_dir.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let base = proc_dir.path();
        let cwd = std::fs::read_link(base.join("cwd")).ok();
        let fds = std::fs::read_dir(base.join("fd"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok());
        for target in cwd.into_iter().chain(fds) {
            if target.starts_with(dir) {
                found.push(target);
                if found.len() >= max {
                    return found;
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_are_read_with_their_escapes() {
        let text = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
43 27 0:39 / /files/corn/My\\040Drive rw,nosuid,nodev - fuse.rclone gdrive:media rw,user_id=0
44 27 0:40 / /tmp/x rw - tmpfs tmpfs rw
";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].point, Path::new("/files/corn/My Drive"));
        assert_eq!(m[1].id, 43);
        assert_eq!(m[1].fstype, "fuse.rclone");
        assert_eq!(m[1].source, "gdrive:media");
        assert_eq!(mounted_at(&m, Path::new("/tmp/x")).unwrap().fstype, "tmpfs");
        assert!(mounted_at(&m, Path::new("/tmp")).is_none());
        assert_eq!(unescape("a\\134b\\"), "a\\b\\");
    }

    #[test]
    fn an_open_file_is_found_under_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("held.txt");
        std::fs::write(&file, b"x").unwrap();
        assert!(open_under(dir.path(), 10).is_empty());
        let held = std::fs::File::open(&file).unwrap();
        assert_eq!(open_under(dir.path(), 10), vec![file.clone()]);
        drop(held);
        assert!(open_under(dir.path(), 10).is_empty());
    }

    #[tokio::test]
    async fn a_plain_folder_answers_and_detaching_it_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let at = |point: PathBuf, id| MountEntry {
            id,
            point,
            fstype: "tmpfs".into(),
            source: String::new(),
        };
        assert_eq!(probe(&at(dir.path().to_owned(), 1)).await, Probe::Answers);
        assert!(matches!(
            probe(&at(dir.path().join("gone"), 2)).await,
            Probe::Stale(_)
        ));
        detach(dir.path()).await.unwrap();
    }
}
