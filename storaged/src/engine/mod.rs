//! The SQLite engine: the database lock, the writer thread with group
//! commit, the reader pool, room on the volume, faults of its files, and
//! the table, pragmas and schema gate a store opens with. It knows rows and
//! transactions; what a record means, and what is derived from it, lives
//! above it ([`derive`] is how a group is told).

pub(crate) mod batch;
pub(crate) mod checkpointer;
pub(crate) mod derive;
pub(crate) mod faults;
pub(crate) mod group;
pub(crate) mod lock;
pub(crate) mod readers;
pub(crate) mod rows;
pub(crate) mod schema;
pub(crate) mod space;
pub(crate) mod tx;
pub(crate) mod writer;
