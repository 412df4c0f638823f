//! watcherd: watches `FILES_PATH`, mints records and appends `file:events`
//! through storaged, and serves the watchers API on its socket.
//!
//! - [`engine`]: what is known, the debounce, renames, the batches sent to
//!   storaged.
//! - [`tree`]: the inotify watches, one per folder, up to the kernel's
//!   limit; the folders past it are polled.
//! - [`debounce`]: a file announced once, after it has been quiet.
//! - [`exclude`]: what is left alone under `FILES_PATH` (`corn/`, meta-core's
//!   own folders nested there).
//! - [`midhash`]: the midhash256 content ID of a file (CONTRACT decision 7).
//! - [`names`]: file and folder names that are not UTF-8, refused once each.
//! - [`scan`]: walking a watched tree and the diff with what is known.
//! - [`watchers`]: `watchers.json`, the polling watchers, in the original's
//!   format.
//! - [`metrics`]: its `/metrics`.
//! - [`api`]: the socket routes.

pub mod api;
pub mod debounce;
pub mod engine;
pub mod exclude;
pub mod metrics;
pub mod midhash;
pub mod names;
pub mod scan;
pub mod tree;
pub mod watchers;

mod run;

pub use run::{EngineEnd, RunError, run};
