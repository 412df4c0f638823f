//! What a write group keeps up to date besides the rows its writes touch
//! (the search index, the schema counters). The store hands it to the
//! writer when it opens, so the engine knows rows and transactions, never
//! what a record means: [`crate::derived`] is the one implementation, and a
//! store opened without it (a benchmark's) derives nothing.

use std::collections::BTreeMap;

use metacore::record::Fields;
use metacore::rid::Rid;
use rusqlite::Connection;

use crate::error::Result;

/// Rows derived from records, brought up to date once per group.
pub(crate) trait Derive: Send + Sync + std::fmt::Debug {
    /// A record's fields as stored now (inside the group's transaction).
    fn fields(&self, conn: &Connection, rid: Rid) -> Result<Fields>;

    /// Before COMMIT: the derived rows of the records the group changed,
    /// from their fields before the group (`touched`) and as they are now.
    fn apply(&self, conn: &Connection, touched: BTreeMap<Rid, Fields>) -> Result<()>;

    /// After [`Derive::apply`] failed for a reason of its own (not for want
    /// of space): marks what it derives stale, so that the next start
    /// builds it again; the group's writes commit meanwhile.
    fn mark_stale(&self, conn: &Connection) -> Result<()>;
}

/// The records a group changed, with their fields as they were before it.
#[derive(Debug)]
pub(crate) struct Touched<'a> {
    derive: &'a dyn Derive,
    before: &'a mut BTreeMap<Rid, Fields>,
}

impl<'a> Touched<'a> {
    pub(crate) fn new(derive: &'a dyn Derive, before: &'a mut BTreeMap<Rid, Fields>) -> Self {
        Self { derive, before }
    }

    /// Before the group's first change to `rid`: its fields as they are.
    pub(crate) fn note(&mut self, conn: &Connection, rid: Rid) -> Result<()> {
        if let std::collections::btree_map::Entry::Vacant(e) = self.before.entry(rid) {
            e.insert(self.derive.fields(conn, rid)?);
        }
        Ok(())
    }

    /// Takes every record noted so far as it is now: a job that rebuilt
    /// the derived rows from the table (a schema rescan) has counted the
    /// group's earlier changes already.
    pub(crate) fn retake(&mut self, conn: &Connection) -> Result<()> {
        for (rid, before) in self.before.iter_mut() {
            *before = self.derive.fields(conn, *rid)?;
        }
        Ok(())
    }
}
