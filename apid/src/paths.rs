//! The public paths that the layers around the router treat apart, named
//! once so that the router, the body budget, CORS and WebDAV agree on them.

/// Where WebDAV is mounted: its bodies stream to the disk, it answers its
/// own `OPTIONS`, and it reads no JSON.
pub(crate) const DAV_PREFIX: &str = "/webdav";

/// The snapshot import: its ZIP body streams to a spool file, and it reads
/// no JSON. (Its route table, `routes/snapshot`, spells the path out, as
/// every route table does: `docs_complete` reads the routes from there.)
pub(crate) const SNAPSHOT_IMPORT: &str = "/api/snapshot/import";
