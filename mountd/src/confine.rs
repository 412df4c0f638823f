//! What a mount may serve, and where it may go: never one of meta-core's
//! own places (issue 23, finding N1).
//!
//! - A remote of type `local` is refused: it has no root of its own, so
//!   any `rclonePath` is any path of the host. A local folder is mounted
//!   through an `alias` remote (`type = alias`, `remote = /the/folder`),
//!   under whose root rclone joins the path (`..` cleaned).
//! - What a configured remote serves is asked of rclone
//!   (`operations/fsinfo`, the exact `fs` string mounted). When it is a
//!   local folder, that folder, its symlinks resolved, must exist and must
//!   not overlap (be inside, equal to, or an ancestor of) any of
//!   meta-core's places: [`Place`].
//! - The remote's own root (`fsinfo` of `remote:`, the path empty) is
//!   judged too (review finding 4): an alias of `/`, or of `/srv` when
//!   FILES_PATH is `/srv/files`, holds a place, so any `rclonePath`
//!   could reach past it (`etc`, `proc`); it is refused whatever the
//!   path. And what is served, resolved, must be inside that root,
//!   resolved: no `..` (rclone cleans it today), no symlink out of it.
//! - The mount's folder and `corn/`, resolved, must not overlap them
//!   either (FILES_PATH aside: the folder is in it by design).
//!
//! The judgement is pure ([`Places::overlapped`], [`resolve`]); the
//! questions to rclone are [`judge_type`] and [`judge_served`]. Messages
//! name a place by its variable, never by its path.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use metacore::Config;
use metacore::api::mountd::MountConfig;

use crate::rc::{FsInfo, Rc};
use crate::request::fs_string;

/// One of meta-core's own places, which no mount serves or covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `META_CORE_PATH`: the shared state (mounts.json, the admin token,
    /// the leader lock, the database by default).
    MetaCorePath,
    /// `FILES_PATH`: what WebDAV serves and watcherd watches; a mount of
    /// it under `corn/` would make `watch/` writable over WebDAV, and one
    /// of `corn/` loops.
    FilesPath,
    /// The folder of `META_CORE_DB_PATH` (it may be outside
    /// META_CORE_PATH).
    DbFolder,
    /// `META_CORE_LOG_DIR`.
    LogDir,
    /// `META_CORE_RUN_DIR`: the daemons' sockets.
    RunDir,
}

impl Place {
    /// The place as an operator names it.
    pub fn name(self) -> &'static str {
        match self {
            Place::MetaCorePath => "META_CORE_PATH",
            Place::FilesPath => "FILES_PATH",
            Place::DbFolder => "the database's folder (META_CORE_DB_PATH)",
            Place::LogDir => "META_CORE_LOG_DIR",
            Place::RunDir => "META_CORE_RUN_DIR",
        }
    }
}

/// meta-core's places, as configured (resolved at each judgement: a
/// symlink may change).
#[derive(Debug, Clone)]
pub struct Places(Vec<(Place, PathBuf)>);

impl Places {
    pub fn new(config: &Config) -> Self {
        let db_folder = config
            .db_path
            .parent()
            .map_or_else(|| config.db_path.clone(), Path::to_path_buf);
        Self(vec![
            (Place::MetaCorePath, config.meta_core_path.clone()),
            (Place::FilesPath, config.files_path.clone()),
            (Place::DbFolder, db_folder),
            (Place::LogDir, config.log_dir.clone()),
            (Place::RunDir, config.run_dir.clone()),
        ])
    }

    /// The first place (but those in `besides`) that `real`, a path with
    /// its symlinks resolved, overlaps.
    pub fn overlapped(&self, real: &Path, besides: &[Place]) -> Option<Place> {
        self.0
            .iter()
            .filter(|(place, _)| !besides.contains(place))
            .find(|(_, path)| overlaps(real, &resolve(path).0))
            .map(|(place, _)| *place)
    }
}

/// Whether `a` is inside, equal to, or an ancestor of `b` (by whole
/// components: `/data2` is not inside `/data`).
pub fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `path` with every symlink resolved, and whether it exists. Of a
/// missing path, the longest part that exists is resolved and the rest
/// joined to it as written (`..` taken back).
pub fn resolve(path: &Path) -> (PathBuf, bool) {
    if let Ok(real) = std::fs::canonicalize(path) {
        return (real, true);
    }
    let mut rest = Vec::new();
    let mut base = path;
    let mut real = loop {
        match base.parent() {
            Some(parent) => {
                if let Some(name) = base.file_name() {
                    rest.push(Component::Normal(name));
                } else {
                    rest.push(Component::ParentDir);
                }
                base = parent;
                if let Ok(real) = std::fs::canonicalize(base) {
                    break real;
                }
            }
            None => break base.to_path_buf(),
        }
    };
    for part in rest.into_iter().rev() {
        match part {
            Component::ParentDir => {
                real.pop();
            }
            other => real.push(other),
        }
    }
    (real, false)
}

/// Why a mount is refused what it would serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "rcloneRemote: no remote {0:?} in rclone's configuration \
         (GET /api/mounts/rclone/remotes lists them)"
    )]
    NotConfigured(String),
    #[error(
        "rcloneRemote: {0:?} is a remote of type local, which has no root of its own \
         (any rclonePath would be any path of the host): configure an alias remote for \
         the folder instead (type = alias, remote = /the/folder) and name that"
    )]
    LocalRemote(String),
    #[error(
        "rcloneRemote: {remote:?} (rclonePath {path:?}) serves a local folder that overlaps \
         {}, one of meta-core's own places, which no mount may serve: point the remote at \
         another folder", .place.name()
    )]
    Overlaps {
        remote: String,
        path: String,
        place: Place,
    },
    #[error(
        "rcloneRemote: the root of {remote:?} is a local folder that overlaps {} (holds it, \
         is it or is inside it), one of meta-core's own places, which any rclonePath could \
         then reach: point the alias at a folder that holds none of meta-core's places",
        .place.name()
    )]
    /// The remote's own root (`remote:`) holds, is or is in a place.
    RootOverlaps { remote: String, place: Place },
    #[error(
        "rclonePath: {path:?} leads out of the root of {remote:?} (through a symlink or `..`), \
         which no mount may leave: name a folder inside that root, or configure an alias \
         remote for the other folder"
    )]
    /// What `remote:path` serves, resolved, is not inside the remote's
    /// own root, resolved.
    Outside { remote: String, path: String },
    #[error(
        "rcloneRemote: {remote:?} (rclonePath {path:?}) serves a local folder that does not exist"
    )]
    Missing { remote: String, path: String },
    #[error(
        "rcloneRemote: rclone names no absolute folder for what {remote:?} (rclonePath \
         {path:?}) serves, so it cannot be checked"
    )]
    NoFolder { remote: String, path: String },
    #[error(
        "rcloneRemote: rclone names no absolute local folder as the root of {0:?}, so what \
         it serves cannot be checked"
    )]
    /// rclone names no absolute local folder as the remote's own root.
    NoRoot(String),
}

impl Refusal {
    /// Whether a create refuses the mount for it (400). A folder that does
    /// not exist yet is not: the mount is kept, and judged again at each
    /// attempt (a disk not plugged in yet).
    pub fn refuses_create(&self) -> bool {
        !matches!(self, Refusal::Missing { .. })
    }
}

/// What [`judge_type`] or [`judge_served`] found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Judged {
    #[error("{0}")]
    Refused(Refusal),
    /// rclone did not say what the remote is (`config/get`).
    #[error("rclone could not read the remote's configuration: {0}")]
    NoType(String),
    /// rclone did not say what the remote serves (`fscache/clear`,
    /// `operations/fsinfo`).
    #[error("rclone could not say what the remote serves: {0}")]
    NoInfo(String),
}

/// Whether `c` names a remote of rclone's configuration, which
/// [`judge_type`] and [`judge_served`] look at. The on-the-fly backends a mount may name (`:memory:`,
/// `:smb`) never serve a local folder.
pub fn needs_judging(c: &MountConfig) -> bool {
    c.kind == "rclone" && !c.rclone_remote.starts_with(':')
}

/// Asks rclone the type of `c`'s remote (`config/get`, which reads
/// rclone.conf as it is now), within `within`: refused when the remote is
/// not in rclone's configuration file or is of type `local`.
pub async fn judge_type(rc: &Rc, c: &MountConfig, within: Duration) -> Result<(), Judged> {
    if !needs_judging(c) {
        return Ok(());
    }
    let remote = &c.rclone_remote;
    let conf = rc.remote(remote, within).await.map_err(Judged::NoType)?;
    match conf.kind.as_str() {
        "" => Err(Judged::Refused(Refusal::NotConfigured(remote.clone()))),
        "local" => Err(Judged::Refused(Refusal::LocalRemote(remote.clone()))),
        _ => Ok(()),
    }
}

/// Asks rclone what `c` would serve (`remote:path`) and, when that is a
/// local folder, the remote's own root (`remote:`), and judges them; each
/// question is answered within `within`. rclone's cache of remotes is cleared first,
/// so the answer follows rclone.conf as it is now: the caller holds the
/// manager's `confine` lock from here to its `mount/mount` (if it
/// mounts), so no other clear comes between.
pub async fn judge_served(
    rc: &Rc,
    c: &MountConfig,
    places: &Places,
    within: Duration,
) -> Result<(), Judged> {
    if !needs_judging(c) {
        return Ok(());
    }
    rc.clear_fs_cache(within).await.map_err(Judged::NoInfo)?;
    let joined = rc
        .fs_info(&fs_string(c), within)
        .await
        .map_err(Judged::NoInfo)?;
    if !joined.features.is_local {
        return Ok(());
    }
    let own = rc
        .fs_info(&format!("{}:", c.rclone_remote), within)
        .await
        .map_err(Judged::NoInfo)?;
    served(c, &joined, &own, places).map_err(Judged::Refused)
}

/// The judgement of what rclone says `c` serves (`joined`, its
/// `remote:path`) and of the remote's own root (`own`, its `remote:`).
fn served(c: &MountConfig, joined: &FsInfo, own: &FsInfo, places: &Places) -> Result<(), Refusal> {
    if !joined.features.is_local {
        return Ok(());
    }
    let (remote, path) = (c.rclone_remote.clone(), c.rclone_path.clone());
    let root = Path::new(&joined.root);
    if !root.is_absolute() {
        return Err(Refusal::NoFolder { remote, path });
    }
    let own_root = Path::new(&own.root);
    if !own.features.is_local || !own_root.is_absolute() {
        return Err(Refusal::NoRoot(remote));
    }
    let (real_own, _) = resolve(own_root);
    if let Some(place) = places.overlapped(&real_own, &[]) {
        tracing::warn!(mount = %c.id, remote = %remote, root = %real_own.display(), place = place.name(), "refused: the remote's own root holds or is in one of meta-core's places");
        return Err(Refusal::RootOverlaps { remote, place });
    }
    let (real, exists) = resolve(root);
    if let Some(place) = places.overlapped(&real, &[]) {
        tracing::warn!(mount = %c.id, remote = %remote, folder = %real.display(), place = place.name(), "refused: the mount would serve one of meta-core's places");
        return Err(Refusal::Overlaps {
            remote,
            path,
            place,
        });
    }
    if !real.starts_with(&real_own) {
        tracing::warn!(mount = %c.id, remote = %remote, root = %real_own.display(), folder = %real.display(), "refused: the mount would serve a folder out of its remote's root");
        return Err(Refusal::Outside { remote, path });
    }
    if !exists {
        return Err(Refusal::Missing { remote, path });
    }
    Ok(())
}

/// Why the mount's folder, or `corn/` that holds it, is refused: it
/// resolves into (or, the folder, over) one of meta-core's places.
pub fn target(places: &Places, corn: &Path, point: &Path) -> Result<(), String> {
    let besides = [Place::FilesPath];
    let (real_corn, _) = resolve(corn);
    let (real_point, _) = resolve(point);
    let inside = places
        .0
        .iter()
        .filter(|(p, _)| !besides.contains(p))
        .find(|(_, path)| real_corn.starts_with(resolve(path).0))
        .map(|(p, _)| *p);
    match inside.or_else(|| places.overlapped(&real_point, &besides)) {
        None => Ok(()),
        Some(place) => {
            tracing::warn!(point = %point.display(), real = %real_point.display(), place = place.name(), "refused: the mount's folder resolves into one of meta-core's places");
            Err(format!(
                "not mounted: the mount's folder {} resolves into {}, one of meta-core's \
                 own places, which no mount may cover",
                point.display(),
                place.name()
            ))
        }
    }
}

#[cfg(test)]
#[path = "confine_test.rs"]
mod tests;
