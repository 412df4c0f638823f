//! What every WebDAV request shares for apid's life: dav-server's
//! configuration, the lock table, the upload, copy and listing turns, and
//! the ledger of copies under way. [`crate::state`] holds it; the handler
//! in [`super`] takes it from there, and this module knows neither.

use std::sync::Arc;

use dav_server::DavConfig;

use super::budget::Ledger;
use super::locks::Locks;
use super::turns::Turns;
use super::volume::{Ctx, Volume};
use crate::paths::DAV_PREFIX;

/// The WebDAV handler's configuration and locks, kept for apid's life.
pub(crate) struct Dav {
    /// dav-server's configuration but for the lock system, which each
    /// request gets as its own view of [`Dav::locks`].
    pub(super) config: DavConfig<Arc<Ctx>>,
    pub(super) locks: Locks,
    /// Bounds the uploads, copies and listings run at once, in all and
    /// per client.
    pub(super) turns: Turns,
    /// What the COPYs under way will still write, per filesystem.
    pub(super) copies: Arc<Ledger>,
}

impl std::fmt::Debug for Dav {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dav")
            .field("uploads_free", &self.turns.uploads_free())
            .finish_non_exhaustive()
    }
}

impl Default for Dav {
    fn default() -> Self {
        let config = DavConfig::new()
            .strip_prefix(DAV_PREFIX)
            .filesystem(Box::new(Volume))
            // Symlinks are followed (where they stay inside), not hidden.
            .hide_symlinks(false);
        Self {
            config,
            locks: Locks::default(),
            turns: Turns::default(),
            copies: Arc::default(),
        }
    }
}
