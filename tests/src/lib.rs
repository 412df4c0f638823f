//! End-to-end harness: the real daemons, started as processes in a temp
//! dir, driven over their real Unix sockets, and the SQLite file read back
//! row by row to check what they left on disk.
//!
//! **Build the binaries first**: these tests spawn `target/<profile>/storaged`
//! and Cargo does not build other packages' binaries for a test crate, so run
//!
//! ```text
//! cargo build --workspace --bins && cargo test -p e2e
//! ```
//!
//! (the README's test command does both). `META_CORE_BIN_DIR` points the
//! harness at another directory of binaries; `E2E_KEEP_DIRS=1` keeps every
//! test's temp dir (database, stderr logs) for a look after the run.
//!
//! - [`apid`]: [`Apid`], one real apid process beside a storaged, on a
//!   free TCP port, with a real HTTP client of it.
//! - [`process`]: [`process::Process`], one spawned daemon: pid, stderr log,
//!   readiness polling, signals, bounded waits, kill on drop.
//! - [`daemon`]: [`Storaged`], one real storaged process with its own dir
//!   and socket client; [`apid`]: [`Apid`] beside it, with an HTTP client.
//! - [`snapshot`]: every row of the database as sorted `(k, v)`, a text
//!   renderer and diff, and the store's invariants as one checker.
//! - [`raw_http`]: a minimal HTTP/1.1 client over the socket for requests
//!   the typed client cannot send (malformed bodies, odd paths) and for
//!   seeing the error envelope byte for byte.
//! - [`supervisor`]: [`supervisor::MetaCore`], one real `meta-core`
//!   supervisor running the daemons, its control socket and its CLI.
//! - [`openapi`]: a checker of answers against `docs/openapi.json`.
//! - [`sse`]: [`sse::Follower`], a real SSE client of apid's event streams.
//! - [`fixtures`]: field maps, random CIDs and RIDs, the golden CID vectors.
//! - [`unchecked`]: writes sent to storaged as given, without the checks
//!   of the typed client's inputs, to see storaged's own refusals.
//! - [`mountd`]: [`mountd::Mountd`], one real mountd beside the real
//!   rclone, and the kernel's mount table.
//! - [`container`]: the image of `docker/Dockerfile` built on a base made
//!   without a registry, and [`container::Container`], one podman container of it.
//! - [`faults`]: the fault suite: the whole tree under load, killed part
//!   by part, and checked for anything lost.
//! - [`browser`]: [`browser::Browser`], a real headless Chromium driven
//!   over WebDriver by a real chromedriver, for the console's tests.
//! - [`wait`]: polling with a deadline, the only way a test waits.

pub mod apid;
pub mod browser;
pub mod container;
pub mod daemon;
pub mod faults;
pub mod fixtures;
pub mod mount;
pub mod mountd;
pub mod openapi;
pub mod process;
pub mod raw_http;
pub mod snapshot;
pub mod sse;
pub mod supervisor;
pub mod unchecked;
pub mod wait;

/// The workspace's root folder (where `docs/` and `docker/` are).
pub fn workspace_root() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lies in the workspace")
}

pub use apid::Apid;
pub use daemon::{Launch, Storaged};
pub use snapshot::Rows;
