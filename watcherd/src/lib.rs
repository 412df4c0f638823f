//! watcherd: watches `FILES_PATH`, mints records and appends `file:events`
//! (being built; the daemon itself is not in the supervisor's table yet).
//!
//! - [`debounce`]: a file announced once, after it has been quiet.
//! - [`midhash`]: the midhash256 content ID of a file (CONTRACT decision 7).
//! - [`scan`]: walking a watched tree, the diff with what is known, renames.
//! - [`watchers`]: `watchers.json`, the polling watchers, in the original's
//!   format.

pub mod debounce;
pub mod midhash;
pub mod scan;
pub mod watchers;
