//! `Layout`: where every file of meta-core lives. The shared volume
//! (`META_CORE_PATH`) holds what a standby must see; the run directory
//! (`META_CORE_RUN_DIR`, never on the shared volume) holds the sockets.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The daemons, each with its socket in the run directory. On the wire a
/// daemon is its name (`"storaged"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Daemon {
    Storaged,
    Apid,
    Watcherd,
    Mountd,
}

impl Daemon {
    pub const ALL: [Daemon; 4] = [
        Daemon::Storaged,
        Daemon::Apid,
        Daemon::Watcherd,
        Daemon::Mountd,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Daemon::Storaged => "storaged",
            Daemon::Apid => "apid",
            Daemon::Watcherd => "watcherd",
            Daemon::Mountd => "mountd",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for Daemon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no daemon of meta-core's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown daemon {0:?} (meta-core's daemons: storaged, apid, watcherd, mountd)")]
pub struct UnknownDaemon(pub String);

impl FromStr for Daemon {
    type Err = UnknownDaemon;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| UnknownDaemon(s.to_owned()))
    }
}

/// Paths derived from the configuration.
#[derive(Debug, Clone)]
pub struct Layout {
    pub root: PathBuf,
    pub files: PathBuf,
    pub db: PathBuf,
    pub run_dir: PathBuf,
}

impl Layout {
    pub fn locks_dir(&self) -> PathBuf {
        self.root.join("locks")
    }

    pub fn leader_lock(&self) -> PathBuf {
        self.locks_dir().join("kv-leader.lock")
    }

    pub fn leader_info(&self) -> PathBuf {
        self.locks_dir().join("kv-leader.info")
    }

    /// storaged's own lock beside the database: whoever holds it has the
    /// database open for writing.
    pub fn db_lock(&self) -> PathBuf {
        db_lock_path(&self.db)
    }

    pub fn services_dir(&self) -> PathBuf {
        self.root.join("services")
    }

    pub fn mounts_file(&self) -> PathBuf {
        self.root.join("mounts").join("mounts.json")
    }

    pub fn mount_errors_dir(&self) -> PathBuf {
        self.root.join("mounts").join("errors")
    }

    /// The admin token made at first start (`secrets/` is 0700, the file
    /// 0600), unless `META_CORE_ADMIN_TOKEN` is set.
    pub fn admin_token_file(&self) -> PathBuf {
        self.root.join("secrets").join("admin-token")
    }

    pub fn watchers_file(&self) -> PathBuf {
        self.root.join("watchers.json")
    }

    pub fn socket(&self, daemon: Daemon) -> PathBuf {
        self.run_dir.join(format!("{}.sock", daemon.name()))
    }

    pub fn supervisor_socket(&self) -> PathBuf {
        self.run_dir.join("meta-core.sock")
    }
}

/// storaged's lock for a database file: `x.db` → `x.db.lock`.
pub fn db_lock_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(".lock");
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_contract() {
        let l = crate::Config::from_lookup(|_| None).unwrap().layout();
        assert_eq!(
            l.leader_lock(),
            PathBuf::from("/meta-core/locks/kv-leader.lock")
        );
        assert_eq!(
            l.leader_info(),
            PathBuf::from("/meta-core/locks/kv-leader.info")
        );
        assert_eq!(l.db, PathBuf::from("/meta-core/db/meta-core.db"));
        assert_eq!(
            l.db_lock(),
            PathBuf::from("/meta-core/db/meta-core.db.lock")
        );
        assert_eq!(
            l.mounts_file(),
            PathBuf::from("/meta-core/mounts/mounts.json")
        );
        assert_eq!(
            l.mount_errors_dir(),
            PathBuf::from("/meta-core/mounts/errors")
        );
        assert_eq!(l.watchers_file(), PathBuf::from("/meta-core/watchers.json"));
        assert_eq!(
            l.socket(Daemon::Storaged),
            PathBuf::from("/run/meta-core/storaged.sock")
        );
    }

    #[test]
    fn daemon_names() {
        for d in Daemon::ALL {
            assert_eq!(Daemon::from_name(d.name()), Some(d));
        }
        assert_eq!(Daemon::from_name("redis"), None);
        assert!("redis".parse::<Daemon>().is_err());
        let json = serde_json::to_string(&Daemon::Watcherd).unwrap();
        assert_eq!(json, "\"watcherd\"");
        assert_eq!(
            serde_json::from_str::<Daemon>(&json).unwrap(),
            Daemon::Watcherd
        );
    }
}
